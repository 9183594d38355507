"""The rules over a series of levels, the level log and the ramp controller (pure, no
UI): a level is judged by its own figures (stackrace.rules.level)."""

from __future__ import annotations

from stackrace.engine.model import (
    EngineSnapshot,
    LatencySummary,
    TargetSnapshot,
    WindowStats,
)
from stackrace.rules.breaking import StepResult, peak, step_result
from stackrace.rules.level import breaking_point
from stackrace.rules.level_log import LEVELS, LevelLog, Ramp


def step(
    level: int,
    rps: float,
    p99: int,
    mean: float | None = None,
    failed: int = 0,
    fastest: int | None = None,
) -> StepResult:
    """A closed loop's level: `level` connections, so a request waits level / rps
    (Little's law); its fastest answer a tenth of its p99 unless given."""
    requests = int(rps * 2)
    window = WindowStats(
        seconds=2.0,
        sent=requests + failed,
        requests=requests,
        ok=requests,
        rps=rps,
        failures={"refused": failed} if failed else {},
        in_flight=float(level),
        latency=LatencySummary(
            count=requests,
            mean=mean if mean is not None else p99 / 2,
            p50=p99 // 2,
            p99=p99,
            max=p99 * 2,
            min=fastest if fastest is not None else p99 // 10,
        ),
    )
    return StepResult(level, window)


def test_healthy_stack_never_breaks():
    steps = [step(c, 100.0 * c, 11_000, fastest=10_000) for c in (1, 2, 5, 10, 20)]
    assert breaking_point(steps) is None


def test_failures_over_one_percent_break():
    steps = [step(1, 100, 11_000), step(2, 200, 11_000, failed=3), step(5, 500, 11_000, failed=20)]
    bp = breaking_point(steps)
    assert bp is not None and bp.level == 5 and "failed" in bp.reason


def test_a_tail_far_past_the_service_time_breaks():
    # the mean is fine (each waits ~10 ms), but the slowest 1 % wait 250 ms: 25× the
    # 10 ms one takes, and 240 ms past it
    steps = [step(1, 100, 10_000, fastest=10_000), step(5, 480, 250_000, fastest=10_000)]
    bp = breaking_point(steps)
    assert bp is not None and bp.level == 5 and bp.kind == "queueing"
    assert bp.reason.startswith("p99 250 ms; one takes ~10 ms (its fastest answer")


def test_flat_qps_alone_is_no_verdict_a_wait_of_four_service_times_is():
    # req/s flat from c=2 to c=5 (204 a second): each waits 5 / 204 = 25 ms, 2.5× the
    # 10 ms one takes: it keeps up; at c=20 each waits ~98 ms: queueing
    steps = [step(1, 100, 10_000, fastest=10_000), step(2, 200, 10_000, fastest=10_000)]
    steps.append(step(5, 204, 30_000, fastest=10_000))
    assert breaking_point(steps) is None
    steps.append(step(20, 204, 120_000, fastest=10_000))
    bp = breaking_point(steps)
    assert bp is not None and bp.level == 20 and bp.kind == "queueing"  # no CPU figure
    assert bp.reason.startswith("20 wait ~98 ms each; one takes ~10 ms (its fastest answer")


def test_a_queue_at_full_cpu_is_saturated_not_queueing():
    steps = [step(1, 100, 10_000, fastest=10_000), step(20, 204, 120_000, fastest=10_000)]
    steps[-1] = StepResult(20, steps[-1].window, cpu_percent=97.0, cpu_capacity=100.0)
    bp = breaking_point(steps)
    assert bp is not None and bp.kind == "saturated" and "CPU 97% of 1 core" in bp.reason


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
    bp = breaking_point([ok, queued])
    # waiting is not failing (a timeout would be): the queue is what broke it
    assert bp is not None and bp.level == 100 and bp.kind == "queueing"


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
    assert breaking_point([calm, lowered]) is None


def test_short_levels_are_not_judged_and_order_is_by_level():
    short = StepResult(50, WindowStats(seconds=0.3, sent=5, requests=5, ok=5, rps=10.0))
    steps = [step(10, 1000, 11_000), short, step(1, 100, 10_000)]
    assert breaking_point(steps) is None
    top = peak(steps)
    assert top is not None and top.level == 10


def _snap(seq: int, concurrency: int, total_requests: int, seconds: float, p99: int = 10_000):
    lat = LatencySummary(
        count=total_requests, mean=p99 / 2, p50=p99 // 2, p99=p99, max=p99, min=p99 // 4
    )
    total = WindowStats(
        seconds=seconds,
        requests=total_requests,
        ok=total_requests,
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
    # it runs to its top, though sync broke early, and says so
    assert [s.level for s in session.ramp_steps["gunicorn-sync"]] == [1, 2, 5, 10]
    assert session.ramp_end == "ran to its top, c=10"
