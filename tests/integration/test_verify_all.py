"""Every stack in stacks.toml is available on a machine set up by the README, and passes
`stackrace verify` (hello, json, io, db and dbjson against the private MariaDB, and the
facts a stack's `expect` names); so does every variant that a param's `choices` offers or
a replayed experiment's preset runs (opcache off, a new connection per request, Beego's
dev mode, Django under flup, gevent and uWSGI, nginx in front of a variant…)."""

from __future__ import annotations

import subprocess

from stackrace.race.core.presets import all_presets
from stackrace.stacks.availability import availability
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.variants import resolve
from tests.helpers import CLI, ROOT


def test_every_stack_is_available():
    stacks = load_stacks()
    found = {n: availability(resolve(n, stacks)) for n in stacks}
    missing = {n: a.reason for n, a in found.items() if not a.available}
    assert not missing, f"unavailable after set-up: {missing}"


def test_verify_passes_for_every_stack():
    r = subprocess.run(
        [*CLI, "verify", "--db"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    assert f"{len(load_stacks())} of {len(load_stacks())} stacks verified" in r.stderr


def experiment_variants() -> list[str]:
    """Every non-default value of a param with `choices`, and every variant a seed preset
    runs (plain stack names are verified by the test above)."""
    out: list[str] = []
    for name, spec in load_stacks().items():
        for key, values in spec.choices.items():
            out += [f"{name}:{key}={v}" for v in values if v != spec.params[key]]
    for preset_name, preset in all_presets().items():
        if preset_name.startswith("seed-"):
            out += [ref for ref in preset.stacks if ":" in ref]
    return list(dict.fromkeys(out))


def test_verify_passes_for_the_variants_the_experiments_use():
    variants = experiment_variants()
    assert "php-fpm-nginx:opcache=off" in variants and "go-beego:runmode=dev" in variants
    r = subprocess.run(
        [*CLI, "verify", "--db", *variants],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    assert f"{len(variants)} of {len(variants)} stacks verified" in r.stderr
