"""Judging an experiment's claims (stackrace.report.claims) on runs built in the test, and
the then/now tables a report prints and writes. Pure logic: no servers."""

from __future__ import annotations

import msgspec
import pytest

from stackrace.report import claims, tables, thennow
from stackrace.report.claims import FAILS, HOLDS, UNTESTABLE, claim_verdicts, judge_claim
from stackrace.report.schema import BenchRun, Claim, Figure, StackResult, Then, dumps, loads
from tests.unit.test_report import level, make_run


def run_with(
    stacks: dict[str, list[tuple[int, float, dict[str, int] | None]]],
    claim_list: list[Claim] | None = None,
    figures: list[Figure] | None = None,
    breaking: dict[str, int] | None = None,
    errors: dict[str, str] | None = None,
) -> BenchRun:
    """A run of the given stacks: name -> [(concurrency, req/s, failures)]."""
    base = make_run()
    results = []
    for name, levels in stacks.items():
        results.append(
            StackResult(
                name=name,
                title=name,
                family="sync",
                version="",
                levels=[level(c, rps, 1000, failures) for c, rps, failures in levels],
                breaking_point=(breaking or {}).get(name),
                breaking_reason="p99 grew" if name in (breaking or {}) else "",
                error=(errors or {}).get(name),
            )
        )
    then = Then(experiment="001", source="test", figures=figures or [], claims=claim_list or [])
    return msgspec.structs.replace(base, stacks=results, then=then)


def ratio(at_least: float | None = None, at_most: float | None = None, lvl: int = 10) -> Claim:
    return Claim(
        id="r",
        text="a beats b",
        kind="ratio",
        stacks=["a", "b"],
        level=lvl,
        then=1.2,
        at_least=at_least,
        at_most=at_most,
    )


# --- ratio -----------------------------------------------------------------------------


def test_ratio_holds_within_bounds_and_reports_the_figure():
    run = run_with({"a": [(10, 1200.0, None)], "b": [(10, 1000.0, None)]})
    v = judge_claim(run, ratio(at_least=1.05))
    assert v.status == HOLDS
    assert v.now == "1.20×" and v.then == "1.20×"
    assert "a 1,200 req/s / b 1,000 req/s at c=10" in v.reason


def test_ratio_does_not_hold_outside_bounds():
    run = run_with({"a": [(10, 900.0, None)], "b": [(10, 1000.0, None)]})
    assert judge_claim(run, ratio(at_least=1.0)).status == FAILS
    run = run_with({"a": [(10, 1500.0, None)], "b": [(10, 1000.0, None)]})
    v = judge_claim(run, ratio(at_least=1.0, at_most=1.3))
    assert v.status == FAILS and "between 1× and 1.3×" in v.reason


@pytest.mark.parametrize(
    "stacks,errors,why",
    [
        ({"a": [(10, 1.0, None)]}, None, "b is not in this run"),
        ({"a": [(10, 1.0, None)], "b": [(100, 1.0, None)]}, None, "b was not measured at c=10"),
        ({"a": [(10, 1.0, None)], "b": [(10, 1.0, None)]}, {"b": "did not start"}, "did not start"),
        ({"a": [(10, 1.0, None)], "b": [(10, 0.0, None)]}, None, "served nothing"),
    ],
)
def test_ratio_cannot_be_tested_without_its_figures(stacks, errors, why):
    v = judge_claim(run_with(stacks, errors=errors), ratio(at_least=1.0))
    assert v.status == UNTESTABLE and why in v.reason, v.reason


def test_ratio_notes_a_saturated_engine():
    run = run_with({"a": [(10, 1200.0, None)], "b": [(10, 1000.0, None)]})
    run.stacks[0].levels[0].engine_saturated = True
    assert "engine saturated its core while loading a" in judge_claim(run, ratio(1.0)).reason


def test_a_verdict_within_the_repeats_spread_says_another_run_may_differ():
    run = run_with({"a": [(10, 1200.0, None)], "b": [(10, 1000.0, None)]})
    assert "repeats" not in judge_claim(run, ratio(1.0)).reason  # measured once
    run.stacks[0].levels[0].samples = [1000.0, 1200.0, 1400.0]  # 33 % apart
    run.stacks[1].levels[0].samples = [990.0, 1000.0, 1010.0]  # 2 %
    v = judge_claim(run, ratio(1.0))  # 1.20× against "at least 1×": 20 % from the line
    assert v.status == HOLDS
    assert "within the repeats' spread (a / b is 20% from the line, their repeats 35%)" in v.reason
    # the same spread on a verdict it cannot turn (2.4× from a 0.5× line) is not noise
    assert "repeats" not in judge_claim(run, ratio(0.5)).reason


def test_a_ranking_names_the_pairs_within_the_repeats_spread():
    run = run_with({"a": [(10, 300.0, None)], "b": [(10, 200.0, None)], "c": [(10, 190.0, None)]})
    for st in run.stacks:
        lv = st.levels[0]
        lv.samples = [lv.rps * 0.9, lv.rps, lv.rps * 1.1]  # 20 % each
    v = judge_claim(run, ranking())
    assert v.status == HOLDS
    assert "b / c is 5% from the line" in v.reason and "a / b" not in v.reason


def test_ratio_without_a_level_uses_the_highest():
    run = run_with(
        {"a": [(10, 100.0, None), (100, 300.0, None)], "b": [(10, 100.0, None), (100, 100.0, None)]}
    )
    claim = msgspec.structs.replace(ratio(at_least=2.0), level=None)
    assert judge_claim(run, claim).now == "3.00×"


# --- ranking ---------------------------------------------------------------------------


def ranking(tolerance: float = 0.0) -> Claim:
    return Claim(
        id="rank", text="a > b > c", kind="ranking", stacks=["a", "b", "c"], level=10,
        tolerance=tolerance,
    )  # fmt: skip


def test_ranking_holds_in_order_and_fails_out_of_order():
    ordered = run_with(
        {"a": [(10, 300.0, None)], "b": [(10, 200.0, None)], "c": [(10, 100.0, None)]}
    )
    v = judge_claim(ordered, ranking())
    assert v.status == HOLDS and v.now == "a > b > c" and v.then == "a > b > c"
    swapped = run_with(
        {"a": [(10, 300.0, None)], "b": [(10, 90.0, None)], "c": [(10, 100.0, None)]}
    )
    v = judge_claim(swapped, ranking())
    assert v.status == FAILS and v.now == "a > c > b" and "b 90 < c 100" in v.reason


def test_ranking_counts_pairs_within_the_tolerance_as_tied():
    close = run_with({"a": [(10, 300.0, None)], "b": [(10, 97.0, None)], "c": [(10, 100.0, None)]})
    assert judge_claim(close, ranking(tolerance=0.05)).status == HOLDS
    assert judge_claim(close, ranking(tolerance=0.01)).status == FAILS


# --- levels: breaking point, first failing level ----------------------------------------


def levels(*failing: int) -> list[tuple[int, float, dict[str, int] | None]]:
    # 1,000 requests per level (level() makes rps × 5 requests); failing levels lose 10 %
    return [(c, 200.0, {"timeout": 100} if c in failing else None) for c in (100, 200, 500, 1000)]


def from_claim(at_least: float | None, at_most: float | None) -> Claim:
    return Claim(
        id="f", text="dies near 200", kind="failures_from", stacks=["s"], then=200,
        at_least=at_least, at_most=at_most,
    )  # fmt: skip


def test_failures_from_finds_the_first_failing_level():
    v = judge_claim(run_with({"s": levels(500, 1000)}), from_claim(200, 700))
    assert v.status == HOLDS and v.now == "c=500" and v.then == "c≈200"
    v = judge_claim(run_with({"s": levels(1000)}), from_claim(200, 700))
    assert v.status == FAILS and v.now == "c=1000"


def test_failures_from_a_stack_that_never_failed():
    never = run_with({"s": levels()})
    # the claim said it would fail by 700, and the levels went past 700: does not hold
    v = judge_claim(never, from_claim(100, 700))
    assert v.status == FAILS and v.now == "none up to 1000"
    # a claim that allows never failing ("survives") holds once the levels reach its bound
    assert judge_claim(never, from_claim(500, None)).status == HOLDS
    # levels too low to tell
    low = run_with({"s": [(100, 200.0, None)]})
    assert judge_claim(low, from_claim(100, 700)).status == UNTESTABLE


def test_failures_below_the_threshold_do_not_count():
    run = run_with({"s": [(100, 200.0, {"reset": 5}), (200, 200.0, {"reset": 100})]})
    v = judge_claim(run, from_claim(None, 500))  # 5 of 1,005 is 0.5 %: under 1 %
    assert v.now == "c=200"


def test_breaking_point_claim_uses_the_run_s_breaking_point():
    claim = Claim(id="b", text="breaks near 100", kind="breaking_point", stacks=["s"],
                  at_least=50, at_most=200)  # fmt: skip
    v = judge_claim(run_with({"s": levels()}, breaking={"s": 100}), claim)
    assert v.status == HOLDS and "p99 grew" in v.reason
    assert judge_claim(run_with({"s": levels()}, breaking={"s": 500}), claim).status == FAILS


# --- no failures, untestable, unknown ----------------------------------------------------


def test_no_failures_at_a_level_and_at_every_level():
    run = run_with({"a": [(10, 100.0, None), (1000, 100.0, {"timeout": 50})], "b": levels()})
    at_10 = Claim(id="n", text="", kind="no_failures", stacks=["a", "b"], level=10)
    v = judge_claim(run, at_10)
    # b has no level 10: the claim cannot be tested rather than half judged
    assert v.status == UNTESTABLE
    every = Claim(id="n", text="", kind="no_failures", stacks=["a", "b"])
    v = judge_claim(run, every)
    assert v.status == FAILS and "a failed 9.09% at c=1000" in v.reason
    lenient = msgspec.structs.replace(every, at_most=0.1)
    assert judge_claim(run, lenient).status == HOLDS


def test_untestable_and_unknown_kinds():
    run = run_with({"a": [(10, 1.0, None)]})
    v = judge_claim(run, Claim(id="u", text="Eurasia", kind="untestable", why="Python 2 only"))
    assert (v.status, v.reason) == (UNTESTABLE, "Python 2 only")
    v = judge_claim(run, Claim(id="x", text="", kind="vibes"))
    assert v.status == UNTESTABLE and "unknown claim kind" in v.reason


def test_a_run_without_an_experiment_has_no_verdicts():
    assert claim_verdicts(make_run()) == []
    assert thennow.markdown(make_run()) == ""


# --- figures and the tables ----------------------------------------------------------------


def test_figure_rows_rank_then_and_now_per_level():
    figures = [
        Figure(stack="a", then=100.0, level=10),
        Figure(stack="b", then=200.0, level=10, label="b then"),
        Figure(stack="missing", then=50.0, level=10),
    ]
    run = run_with({"a": [(10, 500.0, None)], "b": [(10, 400.0, None)]}, figures=figures)
    rows = claims.figure_rows(run)
    assert [(r.then_rank, r.now_rank) for r in rows] == [(2, 1), (1, 2), (3, None)]
    assert rows[2].now is None


def test_then_now_in_markdown_and_in_the_saved_run():
    noted = msgspec.structs.replace(ratio(at_least=1.05), why="one core now")
    claim_list = [noted, Claim(id="u", text="x", kind="untestable", why="gone")]
    run = run_with(
        {"a": [(10, 1200.0, None)], "b": [(10, 1000.0, None)]},
        claim_list=claim_list,
        figures=[Figure(stack="a", then=7663.0, level=10)],
    )
    md = tables.markdown(run)
    assert "### Then beside now: experiment 001 (test)" in md
    assert "| r: a beats b | 1.20× | 1.20× | holds |" in md
    assert "the claim wants at least 1.05×. Note: one core now |" in md
    assert "| u: x | - | - | cannot be tested here | gone |" in md
    assert "| a | 10 | 7,663 | #1 | 1,200 | #1 |" in md
    again = loads(dumps(run))
    assert again.then == run.then  # stored in the run, judged again by `stackrace report`
    assert [v.status for v in claim_verdicts(again)] == [HOLDS, UNTESTABLE]


def test_a_run_file_without_then_still_loads():
    raw = msgspec.json.decode(dumps(make_run()))
    raw.pop("then", None)
    assert loads(msgspec.json.encode(raw)).then is None
