"""A server whose speed depends on the wall clock, not on the load, found unstable by
the capacity search from each probe's own seconds (issue 47; rules/steadiness.py):
fast in even seconds, 80 ms slower in odd ones. Before, one search said "unstable from
c=3" and another, minutes later, "meets p99 < 50 ms up to c=10 (19,215 req/s ± 18 %),
breaks at c=11". A real server on loopback, the real engine, `bench --capacity`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import run_cli

pytestmark = pytest.mark.slow

STACKS = """
[stacks.oddsec]
title = "1 ms in even seconds, 81 ms in odd ones"
language = "python"
family = "async"
command = ["{python}", "{root}/tests/servers/fixed_capacity.py", "{port}",
           "--workers", "1000", "--ms", "1", "--odd-extra-ms", "80"]
"""


def test_a_server_slow_in_odd_seconds_is_named_unstable(tmp_path: Path) -> None:
    stacks = tmp_path / "stacks.toml"
    stacks.write_text(STACKS)
    out = tmp_path / "run.json"
    r = run_cli(
        "--stacks-file", str(stacks), "bench", "--stacks", "oddsec", "--capacity",
        "--slo", "p99<50ms", "--concurrency", "4", "--warmup", "0", "--duration", "2s",
        "--path", "/work", "--json", str(out), timeout=240, quiet_core=True,
    )  # fmt: skip
    said = r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    cap = json.loads(out.read_text())["stacks"][0]["capacity"]
    assert cap["stopped"] == "unstable boundary", said
    # the proof is the probe's own time series, kept in the run file
    shaky = [p for p in cap["probes"] if p["unsteady"] and p["phase"] != "busy"]
    assert shaky, said
    assert all(len(p["slices"]) >= 4 for p in shaky)
    assert "whose own seconds both met and clearly missed" in cap["sentence"], said
    # never a clean boundary claimed above what holds every second
    assert cap["load"] is None or cap["load"] < cap["unstable"][0]
