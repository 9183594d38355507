"""The breaking-point rule, the level log and the ramp controller (pure, no UI)."""

from __future__ import annotations

from stackrace.engine.model import (
    EngineSnapshot,
    LatencySummary,
    TargetSnapshot,
    WindowStats,
)
from stackrace.rules.breaking import StepResult, find_breaking_point, peak, step_result
from stackrace.rules.levels import LEVELS, LevelLog, Ramp


def step(
    level: int, rps: float, p99: int, mean: float | None = None, failed: int = 0
) -> StepResult:
    requests = int(rps * 2)
    window = WindowStats(
        seconds=2.0,
        sent=requests + failed,
        requests=requests,
        ok=requests,
        rps=rps,
        failures={"refused": failed} if failed else {},
        latency=LatencySummary(
            count=requests,
            mean=mean if mean is not None else p99 / 2,
            p50=p99 // 2,
            p99=p99,
            max=p99 * 2,
        ),
    )
    return StepResult(level, window)


def test_healthy_stack_never_breaks():
    steps = [step(c, 100.0 * c, 11_000) for c in (1, 2, 5, 10, 20)]
    assert find_breaking_point(steps) is None


def test_failures_over_one_percent_break():
    steps = [step(1, 100, 11_000), step(2, 200, 11_000, failed=3), step(5, 500, 11_000, failed=20)]
    bp = find_breaking_point(steps)
    assert bp is not None and bp.level == 5 and "failed" in bp.reason


def test_p99_ten_times_the_low_load_value_breaks():
    steps = [
        step(1, 100, 10_000),
        step(2, 195, 50_000, mean=5_000),
        step(5, 480, 101_000, mean=5_000),
    ]
    bp = find_breaking_point(steps)
    assert bp is not None and (bp.level, bp.reason) == (5, "p99 ×10")


def test_flat_qps_with_rising_latency_breaks():
    steps = [step(1, 100, 10_000), step(2, 200, 10_000), step(5, 204, 30_000)]
    bp = find_breaking_point(steps)
    assert bp is not None and bp.level == 5 and bp.reason == "QPS flat, latency ×3.0"
    assert bp.kind == "queueing"  # no CPU figure: not known to be CPU-bound


def test_flat_qps_at_full_cpu_is_saturated_not_queueing():
    steps = [step(1, 100, 10_000), step(2, 200, 10_000), step(5, 204, 30_000)]
    steps[-1] = StepResult(5, steps[-1].window, cpu_percent=97.0, cpu_capacity=100.0)
    bp = find_breaking_point(steps)
    assert bp is not None and bp.kind == "saturated" and "97% CPU" in bp.reason


def test_clients_waiting_longer_than_the_level_count_as_queueing():
    # 90 answers in 2 s and nothing failed, but 900 clients have waited longer than the
    # level itself: the queue is what broke, and the rule sees it
    ok = step(1, 90, 11_000)
    queued = step(100, 90, 1_100_000)
    queued = StepResult(
        100,
        WindowStats(
            seconds=2.0,
            sent=180 + 900,
            requests=180,
            ok=180,
            rps=90.0,
            waiting=900,
            stale=900,
            latency=queued.window.latency,
        ),
    )
    bp = find_breaking_point([ok, queued])
    # waiting is not failing (a timeout would be): the queue is what broke it
    assert bp is not None and bp.level == 100 and bp.kind == "queueing"
    assert "900 waited" in bp.reason


def test_abandoned_requests_never_count_against_the_server():
    calm = step(1, 100, 10_000)
    lowered = StepResult(
        2,
        WindowStats(
            seconds=2.0,
            sent=400 + 300,
            requests=400,
            ok=400,
            rps=200.0,
            failures={"abandoned": 300},
            latency=calm.window.latency,
        ),
    )
    assert find_breaking_point([calm, lowered]) is None


def test_flat_qps_with_flat_latency_is_not_a_break():
    # a level visited twice at the same figures: nothing grew, nothing broke
    steps = [step(1, 100, 10_000), step(2, 101, 10_000)]
    assert find_breaking_point(steps) is None


def test_short_levels_are_not_judged_and_order_is_by_level():
    short = StepResult(50, WindowStats(seconds=0.3, sent=5, requests=5, rps=10.0))
    steps = [step(10, 1000, 11_000), short, step(1, 100, 10_000)]
    assert find_breaking_point(steps) is None
    assert peak(steps).level == 10


def _snap(seq: int, concurrency: int, total_requests: int, seconds: float, p99: int = 10_000):
    lat = LatencySummary(count=total_requests, mean=p99 / 2, p50=p99 // 2, p99=p99, max=p99)
    total = WindowStats(
        seconds=seconds,
        requests=total_requests,
        rps=total_requests / seconds if seconds else 0,
        latency=lat,
    )
    t = TargetSnapshot("a", "http://x/", concurrency, concurrency, None, WindowStats(), total)
    return EngineSnapshot(seq, seq * 0.25, False, False, 1, 0, 0, False, [t])


def test_level_log_commits_the_last_totals_of_each_level():
    log = LevelLog()
    log.feed(_snap(1, 1, 100, 1.0))
    log.feed(_snap(2, 1, 200, 2.0))
    log.feed(_snap(3, 10, 0, 0.0))  # level changed, totals reset
    log.feed(_snap(4, 10, 500, 1.0, p99=200_000))
    results = log.results("a")
    assert [(r.level, r.requests) for r in results] == [(1, 200), (10, 500)]
    bp = log.breaking_point("a")
    assert bp is not None and bp.level == 10


def test_step_result_counts_attempts_without_double_counting_responses():
    w = WindowStats(seconds=1, requests=100, failures={"refused": 10, "http_status": 5})
    r = step_result(5, w)
    assert (r.attempts, r.failed) == (110, 15)


def test_ramp_steps_through_levels_then_restores():
    ramp = Ramp.from_level(1, top=10, dwell=2.0, restore=50)
    assert ramp.levels == [1, 2, 5, 10]
    seen = [ramp.advance(t * 0.5) for t in range(20)]
    assert [s for s in seen if s is not None] == [1, 2, 5, 10, 50]
    assert ramp.done


def test_ramp_stops_early_when_every_stack_broke():
    ramp = Ramp.from_level(1, top=10000, dwell=1.0, restore=5)
    assert ramp.advance(0.0) == 1
    assert ramp.advance(1.0, all_broken=True) == 5
    assert ramp.done and ramp.advance(2.0) is None


def test_levels_are_the_log_steps():
    assert LEVELS == (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)


async def test_a_ramp_started_at_level_one_keeps_its_first_level():
    from stackrace.race.core.core import RaceCore
    from stackrace.race.core.plan import RacePlan
    from stackrace.race.live.demo import DemoSource, SyntheticEngine
    from stackrace.race.live.session import Session
    from stackrace.settings.race_settings import RaceSettings

    engine = SyntheticEngine()
    session = Session(RaceCore(engine, DemoSource(engine), clock=engine.clock, sample_every=0))
    await session.start(
        RacePlan(stacks=("gunicorn-sync",), settings=RaceSettings(workload="io"), concurrency=1)
    )
    for _ in range(12):
        engine.step()
        await session.poll()
    session.start_ramp(top=10, dwell=2.0)  # from the level running now
    for _ in range(40):
        engine.step()
        await session.poll()
    # it runs to its top, though sync broke at c=2, and says so
    assert [s.level for s in session.ramp_steps["gunicorn-sync"]] == [1, 2, 5, 10]
    assert session.ramp_end == "ran to its top, c=10"
