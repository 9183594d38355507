"""The shipped presets, read and resolved against the stacks file without racing them."""

from __future__ import annotations

from stackrace.race.core.presets import PRESETS_DIR, all_presets
from stackrace.settings.workloads import WORKLOADS
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.variants import resolve

STACKS = load_stacks()


def test_every_preset_parses_and_its_stacks_exist():
    presets = all_presets()
    assert {"vps-2011", "sync-ceiling", "php-vs-python-hello", "async-drivers"} <= set(presets)
    for name, preset in presets.items():
        for ref in preset.stacks:
            stack = resolve(ref, STACKS, f"{PRESETS_DIR.name}/{name}.toml")
            assert stack.serves(preset.settings.workload), (name, ref, preset.settings.workload)
        assert preset.settings.workload in WORKLOADS


def test_one_preset_replays_each_classic_experiment():
    experiments = {p.experiment for n, p in all_presets().items() if n.startswith("seed-")}
    assert experiments == {"000", "001", "002", "003", "004"}
