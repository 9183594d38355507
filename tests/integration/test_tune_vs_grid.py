"""`stackrace tune gunicorn-gthread --slo 'p99<50ms' --workload io --budget 2m` on the
real stack names a configuration the exhaustive grid agrees with, or says the leaders
are tied; and it keeps its budget.

The space is workers 1,2,3 × threads 1,4,16 (nine candidates): tune's coarse pass, its
refinement around the leader and its rounds measure what they need; the grid (`bench
--capacity` over all nine, one at a time, on the same pinned cores) measures every one.
Both are measured on a loaded 2-core machine where the same configuration's capacity
moves 10–20 % from run to run, so the comparison is a ratio read inside one
measurement: the grid's own capacity for tune's winner (or for each configuration it
called tied) against the grid's best. The margin is 25 %: wide enough for the noise of
two searches on a shared core, narrow enough to fail a tune that picks a configuration
off the plateau (threads=1 is a quarter of threads=4 and less than a tenth of
threads=16 on /io's 10 ms wait).

Cost: about 4 minutes (tune 2 minutes, the grid nine short searches)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.helpers import run_cli

# About 5 minutes (a tune, then all nine candidates measured): too long for CI's 20, so
# it runs when asked, `STACKRACE_LONG_TESTS=1 ./dev test tests/integration/test_tune_vs_grid.py`
# (it passed in the full run of 2026-11-24 17:00 on main)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get("STACKRACE_LONG_TESTS"),
        reason="5 minutes: set STACKRACE_LONG_TESTS=1 to run it (docs/development.md: Test tiers)",
    ),
]

WORKERS, THREADS = (1, 2, 3), (1, 4, 16)
MARGIN = 0.25  # tune's winner, as the grid measured it, within 25 % of the grid's best
BUDGET_S = 120.0
# the budget is kept by the clock, within one probe (≤ 2 s measured + settle and drain)
# and one candidate's start and stop: 30 s of slack on a loaded machine
BUDGET_SLACK_S = 30.0


def capacities(run_file: Path) -> dict[str, float]:
    run = json.loads(run_file.read_text())
    return {
        st["name"]: (st["capacity"]["capacity"] or 0.0) if st["capacity"]["load"] else 0.0
        for st in run["stacks"]
        if st.get("capacity")
    }


def test_tune_is_within_the_margin_of_an_exhaustive_grid(tmp_path: Path) -> None:
    tune_json = tmp_path / "tune.json"
    r = run_cli(
        "tune", "gunicorn-gthread", "--slo", "p99<50ms", "--workload", "io",
        "--budget", "2m", "--workers", ",".join(map(str, WORKERS)),
        "--threads", ",".join(map(str, THREADS)), "--json", str(tune_json),
        timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    took = re.search(r"tune took (\d+)s of a 120s budget", r.stderr)
    assert took is not None, r.stderr
    assert int(took.group(1)) <= BUDGET_S + BUDGET_SLACK_S, r.stderr
    tune = json.loads(tune_json.read_text())["tune"]
    named = [tune["winner"]] if tune["winner"] else tune["tied"]
    assert named, tune["verdict"]

    grid_json = tmp_path / "grid.json"
    names = [f"gunicorn-gthread:workers={w},threads={t}" for w in WORKERS for t in THREADS]
    g = run_cli(
        "bench", "--stacks", ",".join(names), "--workload", "io", "--slo", "p99<50ms",
        "--capacity", "--isolation", "rotate", "--budget", "15s", "--duration", "2s",
        "--warmup", "0", "--concurrency", "4", "--no-progress", "--json", str(grid_json),
        timeout=900,
    )  # fmt: skip
    assert g.returncode in (0, 1), g.stdout + g.stderr
    grid = capacities(grid_json)
    assert set(grid) == set(names), grid
    best = max(grid.values())
    assert best > 0, grid
    report = ", ".join(f"{k.split(':')[1]} {v:,.0f}" for k, v in grid.items())
    for name in named:
        ratio = grid[name] / best
        assert ratio >= 1 - MARGIN, (
            f"tune's {name} ({tune['verdict']}) holds {ratio:.0%} of the grid's best ({report})"
        )
