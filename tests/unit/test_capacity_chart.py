"""The tune chart (report/capacity.svg): capacity against workers × threads, a cell per
pair with its req/s, the winner outlined; and one ranking order for every table."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from stackrace.report import capacity
from stackrace.report.schema import CapacityResult, StackResult


def result(name: str, rps: float | None) -> StackResult:
    cap = CapacityResult(
        slo="p99 < 50 ms",
        mode="concurrency",
        load=None if rps is None else 8,
        capacity=rps,
        margin=0.02,
        breaks_at=9,
        breaks_why="p99 74 ms ≥ 50 ms",
        stopped="precision reached",
        sentence="",
        needed_answers=1000,
        precision=0.05,
    )
    return StackResult(
        name=name, title=name, family="threaded", version="", levels=[], capacity=cap
    )


def test_heatmap_has_a_cell_per_workers_and_threads_with_the_winner_outlined():
    runs = [
        result(f"gunicorn-gthread:workers={w},threads={t}", rps)
        for (w, t), rps in {
            (1, 1): 90.0,
            (1, 8): 700.0,
            (3, 1): 280.0,
            (3, 8): 1900.0,
            (5, 1): None,  # cannot meet: a cell of its own, not a gap
        }.items()
    ]
    workers, threads, cells = capacity.grid(runs)
    assert workers == [1, 3, 5] and threads == [1, 8]
    assert cells[(3, 8)] == 1900.0 and cells[(5, 1)] == 0.0 and (5, 8) not in cells
    svg = capacity.svg(runs, "p99 < 50 ms")
    root = ET.fromstring(svg)  # well-formed
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "workers →" in texts and "threads ↓" in texts
    assert "1,900" in texts and "cannot" in texts
    outlined = [r for r in root.iter("{http://www.w3.org/2000/svg}rect") if r.get("stroke")]
    assert len(outlined) == 1  # the winner, workers=3 threads=8: second column, second row
    assert outlined[0].get("x") == str(110 + 74) and outlined[0].get("y") == str(56 + 26)


def test_a_sweep_of_neither_axis_draws_bars_only():
    runs = [result("uvicorn:loop=uvloop", 900.0), result("uvicorn:loop=asyncio", 600.0)]
    assert capacity.grid(runs) == ([], [], {})
    assert "workers →" not in capacity.svg(runs, "p99 < 50 ms")


def test_cannot_meet_ranks_last():
    runs = [result("a", None), result("b", 10.0), result("c", 500.0)]
    assert [st.name for st in capacity.ranked(runs)] == ["c", "b", "a"]
