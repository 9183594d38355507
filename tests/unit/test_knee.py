"""The knee predicted from what a stack is (rules/knee.py): Little's law on a fixed pool."""

from __future__ import annotations

import pytest

from stackrace.engine.model import LatencySummary, WindowStats
from stackrace.rules.breaking import StepResult
from stackrace.rules.knee import knee_miss, predict_knee, service_us, stack_pool


def step(level: int, p50_ms: float, rps: float = 100.0, fastest_ms: float | None = None,
         seconds: float = 3.0) -> StepResult:  # fmt: skip
    n = int(rps * seconds)
    fastest = fastest_ms if fastest_ms is not None else p50_ms * 0.8
    lat = LatencySummary(count=n, mean=p50_ms * 1000, p50=int(p50_ms * 1000),
                         p99=int(p50_ms * 2000), max=int(p50_ms * 3000),
                         min=int(fastest * 1000))  # fmt: skip
    w = WindowStats(seconds=seconds, sent=n, requests=n, ok=n, rps=rps, latency=lat)
    return StepResult(level, w, fastest_us=int(fastest * 1000))


def test_one_sync_worker_at_11_ms_queues_from_about_90_per_second_at_c_1():
    pool = stack_pool("sync", workers=1, threads=1)
    pred = predict_knee(pool, [step(1, 11.0, rps=90)])
    assert pred is not None
    assert pred.servers == 1 and pred.service_ms == pytest.approx(11.0)
    assert pred.rate == pytest.approx(1000 / 11, rel=0.01)
    assert pred.concurrency == 1
    assert pred.sentence() == (
        "1 worker, ~11 ms each (median at c=1): queueing expected from ~91 req/s (c≈1)"
    )


def test_workers_times_threads_make_the_pool_and_the_db_pool_caps_it():
    pool = stack_pool("threaded", workers=2, threads=8)
    assert pool.servers == 16 and pool.words == "2 workers × 8 threads"
    pred = predict_knee(pool, [step(1, 10.0), step(8, 10.5)])
    assert pred is not None and pred.rate == pytest.approx(1600, rel=0.01)
    assert pred.concurrency == 16
    capped = stack_pool("threaded", workers=2, threads=8, db_pool=4)
    assert capped.servers == 4 and "4 db connections" in capped.words


def test_an_async_server_has_no_fixed_pool_and_no_prediction():
    pool = stack_pool("async", workers=1, threads=1)
    assert pool.servers == 0
    assert pool.words == "no prediction: not a fixed pool (async server)"
    assert predict_knee(pool, [step(1, 1.0)]) is None


def test_the_service_time_is_the_median_before_any_queue_else_the_fastest_answer():
    # c=1 on a 1-worker server: no queue, its median is the service time
    assert service_us([step(32, 300.0), step(1, 11.0)], servers=1) == (11000.0, "median at c=1")
    # only queued levels measured: the fastest answer (a lower bound), said so
    got, where = service_us([step(32, 300.0, fastest_ms=10.0)], servers=1)
    assert (got, where) == (10000.0, "fastest answer")
    assert service_us([], servers=1) == (None, "")
    assert predict_knee(stack_pool("sync", 1, 1), []) is None


def test_the_cpu_caps_a_pool_bigger_than_its_cores_can_serve():
    # 8 threads, each request 2 ms of which 2 ms on CPU, one core: 1 at once, not 8
    pool = stack_pool("threaded", workers=1, threads=8)
    pred = predict_knee(pool, [step(1, 2.0)], cpu_us_per_request=2000, cores=1)
    assert pred is not None and pred.rate == pytest.approx(500, rel=0.01)
    assert "the CPU caps it" in pred.basis
    # a request that sleeps 10 ms on 0.2 ms of CPU: the pool decides
    io = predict_knee(pool, [step(1, 10.0)], cpu_us_per_request=200, cores=1)
    assert io is not None and io.rate == pytest.approx(800, rel=0.01)


def test_a_knee_within_a_quarter_of_the_prediction_is_not_remarked():
    pred = predict_knee(stack_pool("sync", 1, 1), [step(1, 10.0)])
    assert pred is not None  # ~100 req/s from c≈1
    assert knee_miss(pred, broke_at=2, below=1, peak_rps=95) == ""
    # judged broken at c=5 (the rules wait for a queue of several service times): the
    # plateau is what is compared, and it came where predicted
    assert knee_miss(pred, broke_at=5, below=2, peak_rps=110) == ""


def test_a_knee_far_from_the_prediction_says_how_far():
    pred = predict_knee(stack_pool("threaded", 1, 8), [step(1, 10.0)])
    assert pred is not None  # 800 req/s from c≈8
    assert knee_miss(pred, broke_at=2, below=1, peak_rps=120) == (
        "knee off the prediction: its req/s levelled at 120 (between c=1 and c=2), "
        "-85% from the predicted ~800"
    )
    # it never broke: the levels may not have reached the knee, nothing to say
    assert knee_miss(pred, broke_at=None, below=None, peak_rps=120) == ""
