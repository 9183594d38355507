"""The one window arithmetic (engine/window_sum.py WindowSum): every figure has a rule,
the parts add up as the rules say, and sent == answered + lost + waiting survives
repeats with gaps between them."""

from __future__ import annotations

from stackrace.engine.model import KindStats, LatencySummary, WindowStats
from stackrace.engine.window_sum import WINDOW_RULES, WindowSum


def test_every_figure_of_a_window_has_a_rule():
    # a figure added to WindowStats without a rule here would be dropped (or kept from
    # the first part) silently when bench merges repeats or the demo its totals
    assert set(WINDOW_RULES) == set(WindowStats.__struct_fields__)


def _part(carried: int, started: int, answered: int, lost: int, seconds: float = 1.0):
    waiting = carried + started - answered - lost
    return WindowStats(
        seconds=seconds,
        sent=carried + started,
        carried_in=carried,
        waiting=waiting,
        requests=answered,
        ok=answered,
        bytes=answered * 10,
        failures={"timeout": lost} if lost else {},
        status={500: 1},
        in_flight=float(waiting),
        engine_cpu=50.0 if seconds == 1.0 else 10.0,
        latency=LatencySummary(count=answered, p99=answered),
        kinds=[KindStats(sent=carried + started, answered=answered, waiting=waiting)],
    )


def test_contiguous_parts_keep_the_first_carried_in():
    s = WindowSum()
    s.add(_part(5, 100, 90, 5))  # ends with 10 waiting
    s.add(_part(10, 100, 100, 0))  # carries those 10 in, ends with 10
    w = s.stats()
    assert w.carried_in == 5  # the window began when its first part did
    assert w.sent == 5 + 200 == w.requests + w.lost + w.waiting
    assert (w.requests, w.lost, w.waiting) == (190, 5, 10)
    assert w.started == 200
    assert w.failures == {"timeout": 5} and w.status == {500: 2}
    assert w.bytes == 1900 and w.seconds == 2.0 and w.rps == 95.0
    assert w.kinds is not None and w.kinds[0].answered == 190 and w.kinds[0].waiting == 10


def test_repeats_with_a_gap_keep_the_accounting():
    # bench's repeats: the 10 waiting at the end of the first were answered between
    # the repeats, and 3 others were waiting when the second began
    s = WindowSum()
    s.add(_part(0, 100, 90, 0))
    s.add(_part(3, 50, 50, 0))
    w = s.stats()
    assert w.sent == w.requests + w.lost + w.waiting == 143
    assert w.carried_in == 0


def test_gauges_are_the_latest_and_averages_weighted_by_time():
    s = WindowSum()
    s.add(_part(0, 100, 90, 0, seconds=1.0))  # engine 50 %
    s.add(_part(10, 100, 100, 0, seconds=3.0))  # engine 10 %
    w = s.stats()
    assert w.waiting == 10
    assert w.engine_cpu == (50.0 * 1 + 10.0 * 3) / 4
    assert w.in_flight == (10 * 1 + 10 * 3) / 4


def test_latency_is_the_merged_histograms_when_given():
    s = WindowSum()
    s.add(_part(0, 100, 90, 0))
    assert s.stats().latency.p99 == 90  # one part: its own
    merged = LatencySummary(count=190, p99=123)
    s.add(_part(10, 100, 100, 0), latency=merged)
    assert s.stats().latency == merged


def test_stats_is_a_copy():
    s = WindowSum()
    s.add(_part(0, 10, 10, 0))
    first = s.stats()
    first.failures["x"] = 1
    s.add(_part(0, 10, 10, 0))
    assert "x" not in s.stats().failures and first.requests == 10
