"""The ramp summary's figures are the per-level table's (race/live/summary.py), and its files
say which race they are of."""

from __future__ import annotations

import json

from stackrace.engine.model import LatencySummary, WindowStats
from stackrace.race.live.summary import (
    SummaryContext,
    at_breaking,
    export,
    level_figures,
    to_markdown,
)
from stackrace.race.live.view import SummaryRow
from stackrace.rules.breaking import StepResult, peak, step_result
from stackrace.rules.level import breaking_point, judge_steps


def _window(
    answered: int, failed: int, stale: int, p99_ms: float, seconds: float = 3.0
) -> WindowStats:
    lat = LatencySummary()
    if answered:
        lat = LatencySummary(count=answered, mean=p99_ms * 500, p50=int(p99_ms * 500),
                             p99=int(p99_ms * 1000), max=int(p99_ms * 1200),
                             min=int(p99_ms * 100))  # fmt: skip
    return WindowStats(seconds=seconds, sent=answered + failed + stale, requests=answered,
                       ok=answered, rps=answered / seconds, waiting=stale, stale=stale,
                       failures={"timeout": failed} if failed else {}, latency=lat)  # fmt: skip


def _row(steps: list[StepResult]) -> SummaryRow:
    return SummaryRow(
        id="gunicorn-sync", name="gunicorn sync", peak=peak(steps),
        breaking=breaking_point(steps), mem_before=None, mem_peak=0,
        steps=tuple(steps), why="", judgments=tuple(judge_steps(steps)),
    )  # fmt: skip


def test_the_breaking_points_figures_are_its_per_level_cell():
    """The case from the issue: right after an overload, c=20 had 5 % of its requests
    fail and the rest wait with no answer; the summary said "5.0 % failed", the table
    "100 % failed" and "p99 there" read 0 µs. Now both say the same, and nothing
    answered reads "no answers"."""
    steps = [
        step_result(1, _window(270, 0, 0, 12)),
        step_result(2, _window(540, 0, 0, 12)),
        step_result(20, _window(0, 2, 38, 0)),  # nothing answered: 2 failed, 38 waited
    ]
    row = _row(steps)
    assert row.breaking is not None and row.breaking.level == 20
    there = at_breaking(row)
    assert there == level_figures(steps[2])
    assert there.p99() == "no answers" and there.no_answer == 38
    assert f"{there.failed_pct:.1f}%" == "5.0%"  # the rule's own share: 2 of 40
    assert row.breaking.reason == "5.0% failed (timed out)"
    md = to_markdown([row], False, title="Ramp result")
    summary_line = next(line for line in md.splitlines() if line.startswith("| gunicorn sync |"))
    assert "| no answers | 5.0% |" in summary_line
    table_line = md.splitlines()[-1]
    assert table_line.endswith("| 0 · no answers · 5.0% failed, 38 no answer |")


def test_the_files_say_which_race_they_are_of(tmp_path):
    steps = [step_result(1, _window(270, 0, 0, 12)), step_result(10, _window(270, 0, 0, 110))]
    context = SummaryContext(
        workload="io", params={"io delay": "10 ms"}, path="/io?ms=10", timeout_s=10.0,
        keepalive=True, mode="closed loop",
        placement="4 stacks share 1 core (cpu 0); the engines run on cpu 1",
        created="2026-11-24 12:00:00 +0000", ended="ran to its top, c=2,000",
        notes=["gunicorn sync restarted: accept queue 1,634 of 2,048"],
    )  # fmt: skip
    md, js = export([_row(steps)], False, tmp_path, title="Ramp result", context=context)
    text = md.read_text()
    for words in ("workload: io (io delay 10 ms)", "GET /io?ms=10", "timeout 10 s",
                  "keep-alive", "share 1 core", "2026-11-24", "stackrace ",
                  "ran to its top, c=2,000", "clean start: gunicorn sync restarted"):  # fmt: skip
        assert words in text, words
    race = json.loads(js.read_text())["race"]
    assert race["workload"] == "io" and race["params"] == {"io delay": "10 ms"}
    assert race["timeout_s"] == 10.0 and race["keepalive"] is True
    assert race["placement"].startswith("4 stacks share") and race["version"]
    assert race["created"].startswith("2026-11-24")


def test_a_stack_that_only_waited_for_a_full_shared_core_says_so_not_not_reached():
    from stackrace.race.live.summary import unbroken_text
    from stackrace.rules.breaking import CpuShare

    starved = CpuShare(used=25, capacity=100, waited=70, core_full=True)
    steps = [
        step_result(10, _window(3000, 0, 0, 3), share=starved),
        step_result(100, _window(3030, 0, 0, 60), share=starved),  # waits 100× 0.3 ms
    ]
    row = _row(steps)
    assert row.breaking is None
    assert unbroken_text(row, short=True) == "not judged from c=10"
    said = unbroken_text(row)
    assert said.startswith("not judged at c=10, c=100: a busy core was the limit (its core")
    assert "shared and full: it ran 25%, and waited 74% of the time it wanted it" in said
    md = to_markdown([row], False, title="t")
    assert "| not judged from c=10 |" in md and "not judged at c=10, c=100" in md
    assert unbroken_text(_row(steps[:0])) == "no level measured long enough to judge"
    assert unbroken_text(_row(steps[:0]), short=True) == "not reached"
