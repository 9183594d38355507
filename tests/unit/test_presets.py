"""Presets: the settings a replayed experiment needs load, and its claims are checked."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from stackrace.race.core.presets import load_preset
from stackrace.stacks.definition import ConfigError

GOOD = """
description = "d"
experiment = "000"
stacks = ["a", "b"]
keepalive = false
warmup_requests = 5000
[[figures]]
stack = "a"
then = 154
level = 100
[[claims]]
id = "c1"
text = "a beats b"
kind = "ratio"
stacks = ["a", "b"]
at_least = 1.0
"""


def write(tmp_path: Path, text: str) -> str:
    p = tmp_path / "p.toml"
    p.write_text(text)
    return str(p)


def test_a_preset_with_claims_loads_and_carries_them_into_the_run(tmp_path):
    preset = load_preset(write(tmp_path, GOOD))
    assert (preset.settings.keepalive, preset.settings.warmup_requests) == (False, 5000)
    then = preset.then()
    assert then is not None and then.experiment == "000"
    assert [c.id for c in then.claims] == ["c1"] and then.figures[0].then == 154


def test_defaults_keep_old_presets_as_they_were(tmp_path):
    preset = load_preset(write(tmp_path, 'description = "d"\nstacks = ["a"]\n'))
    s = preset.settings
    assert (s.keepalive, s.warmup_requests, preset.then()) == (True, 0, None)


@pytest.mark.parametrize(
    "change,message",
    [
        (('kind = "ratio"', 'kind = "vibes"'), "claim 'c1': kind 'vibes' is not one of"),
        (('stacks = ["a", "b"]\nat_least', 'stacks = ["a", "z"]\nat_least'), "z not among"),
        (('kind = "ratio"', 'kind = "untestable"'), "an untestable claim says why"),
        (('experiment = "000"\n', ""), "claims and figures need `experiment`"),
        (('stack = "a"', 'stack = "q"'), "figure for q: not among"),
    ],
)
def test_claims_that_cannot_be_judged_are_refused(tmp_path, change, message):
    with pytest.raises(ConfigError, match=message):
        load_preset(write(tmp_path, GOOD.replace(*change)))


def test_duplicate_claim_ids_are_refused(tmp_path):
    twice = GOOD + GOOD[GOOD.index("[[claims]]") :]
    with pytest.raises(ConfigError, match="claim 'c1': the id is used twice"):
        load_preset(write(tmp_path, twice))


def test_the_levels_field_keeps_its_key_in_every_file_and_on_the_command_line(tmp_path):
    """`RaceSettings.concurrency_levels` (a list: bench's levels) is `concurrency` in a
    preset, a run file and `--concurrency`, as before the field was renamed: every
    preset and committed run file still loads with its levels, a run file's bad levels
    are an error naming the file's key, and a run file written now keeps the old key."""
    import json
    import tomllib

    from stackrace.cli import build_parser
    from stackrace.commands.settings_args import given
    from stackrace.report.write import read_run
    from stackrace.settings.race_settings import RaceSettings, check_values, field_of_key

    root = Path(__file__).resolve().parents[2]
    assert field_of_key()["concurrency"] == "concurrency_levels"
    for path in sorted((root / "presets").glob("*.toml")):
        declared = tomllib.loads(path.read_text()).get("concurrency")
        settings = load_preset(str(path)).settings
        assert settings.concurrency_levels == (declared or [10, 100]), path.name
    runs = sorted((root / "results").glob("*.json"))
    assert runs
    for path in runs:
        old = json.loads(path.read_text())["settings"]["concurrency"]
        run = read_run(str(path))
        assert run.settings.concurrency_levels == old, path.name
        assert json.loads(msgspec.json.encode(run.settings))["concurrency"] == old
    bad = json.loads(runs[0].read_text())
    bad["settings"]["concurrency"] = [-5, 0]
    broken = tmp_path / "run.json"
    broken.write_text(json.dumps(bad))
    with pytest.raises(Exception, match="key 'concurrency'"):
        read_run(str(broken))
    with pytest.raises(ValueError, match="key 'concurrency'"):
        check_values(RaceSettings(concurrency_levels=[0]), "x.json: settings")
    args = build_parser().parse_args(["bench", "--stacks", "uvicorn", "--concurrency", "1,5"])
    assert given(args)["concurrency_levels"] == [1, 5]
