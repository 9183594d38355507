"""A probe's own time series (rules/steadiness.py): intervals that both meet and clearly
miss a latency bound, each in a good share of the probe, make it unsteady; one stray
slow interval, or a percentile that scatters near the bound, does not."""

from __future__ import annotations

from stackrace.rules.steadiness import Slice, unsteady

BOUND = 50_000.0


def series(*ms: float, answers: int = 100) -> list[Slice]:
    return [Slice(answers, m * 1000) for m in ms]


def test_fast_and_slow_seconds_are_unsteady_with_the_figures():
    why = unsteady(series(2, 2, 2, 2, 81, 81, 81, 81), BOUND)
    assert why == "its own intervals disagree: 4 of 8 had p99 ~81 ms, 4 ~2.0 ms (bound 50 ms)"


def test_one_stall_is_not_a_flap():
    assert unsteady(series(2, 2, 2, 130, 2, 2, 2, 2), BOUND) == ""
    assert unsteady(series(2, 2, 2, 130, 2, 2, 2, 2, 2, 2, 2, 90), BOUND) == ""


def test_a_percentile_near_the_bound_scatters_without_being_unsteady():
    assert unsteady(series(45, 55, 48, 60, 52, 47, 58, 49), BOUND) == ""


def test_intervals_with_too_few_answers_and_no_bound_say_nothing():
    thin = [Slice(1, 2000.0)] * 4 + [Slice(2, 90_000.0)] * 4
    assert unsteady(thin, BOUND) == ""
    assert unsteady(series(2, 2, 81, 81), None) == ""
