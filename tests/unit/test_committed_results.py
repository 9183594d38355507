"""The run files committed in results/ (the figures the docs quote) hold what every report
promises: each level accounts for every request, and a closed-loop level whose answers
do not explain its connections (Little's law) says so itself. A file written by an older
engine that hid waiting clients fails here, not in a reader's hands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stackrace.report.write import read_run
from stackrace.rules.accounting import LITTLE_LOW

RESULTS = sorted((Path(__file__).resolve().parents[2] / "results").glob("*.json"))


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.name)
def test_every_level_accounts_for_its_clients(path: Path):
    run = read_run(str(path))
    assert run.stacks, path
    for stack in run.stacks:
        for level in stack.levels:
            w = level.window
            where = f"{path.name} {stack.name} @ {level.level}"
            lost = sum(w.failures.values())
            # sent = answered + failed without an answer + waiting (failures with a
            # response are among the answers)
            assert w.sent >= w.requests + w.waiting, where
            assert w.latency.unit == "us" and w.latency.count == w.requests, where
            if level.rate is not None or not level.concurrency:
                continue
            timed = w.span_seconds or w.seconds
            explained = w.requests / timed * w.latency.mean / 1e6
            # the answers plus those still waiting cover the connections, or the level
            # itself carries the flag with its reason
            covered = explained + w.waiting + lost >= LITTLE_LOW * level.concurrency
            flagged = level.little is not None and not level.little.ok and level.little.reason
            assert covered or flagged, f"{where}: λW {explained:.0f} + waiting {w.waiting}"
            assert level.little is not None, where


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.name)
def test_the_headline_figures_stand_at_each_level_s_top(path: Path):
    """A reader without stackrace finds req/s, mean latency and waiting on the level
    itself (as schema 1 had them), equal to the window's."""
    raw = json.loads(path.read_bytes())
    for stack in raw["stacks"]:
        for level in stack["levels"]:
            w = level["window"]
            for key in ("rps", "requests", "waiting", "latency"):
                assert level[key] == w[key], f"{path.name} {stack['name']}: {key}"
