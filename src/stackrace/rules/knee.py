"""The knee predicted before the load reaches it, and checked once it has.

    pred = predict_knee(stack_pool("sync", workers=1, threads=1), steps)
    pred.sentence()    # "1 worker × 1 thread, ~11 ms each: queueing expected from ~90 req/s (c≈1)"
    knee_miss(pred, broke_at=32, below=1, peak_rps=88.0)   # "" when it came where it should

A server with a fixed pool (a sync or threaded worker, a prefork process manager)
serves at most `servers` requests at once, each taking the service time S: by Little's
law its capacity is servers / S, and a closed loop reaches it when its clients
outnumber the servers (c ≈ servers; a client's own time on the wire is in S, measured
from the client). Each request also needs the share of a core it uses in service, so
on fewer cores than that the CPU caps the pool first (a one-worker-per-core limit the
rules know from the stack's CPU); the database workload's pool caps it too.

The service time is the one measured at the first levels, before any queue: the
median answer at the lowest level where the clients do not outnumber the servers (its
fastest answer as a last resort: a lower bound of S, which flatters the capacity —
said in the basis). An async, greenlet or event-loop server has no fixed pool: its
knee is its CPU's or its backend's, not a count, and nothing is predicted (the reason
is said in one line).

Pure arithmetic, no I/O: the live pane, the ramp summary, bench and the JSON read the
same prediction; the inputs are kept in `KneePrediction` so a reader can check it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from stackrace.evidence.model import KneePrediction
from stackrace.rules.breaking import StepResult
from stackrace.rules.level import fastest_us, level_text, secs

# families whose servers are a fixed pool of workers × threads (stacks.toml's family)
FIXED_POOL = ("sync", "threaded", "prefork")
OFF_BY = 0.25  # a measured knee further than this from the prediction is said to be off


@dataclass(frozen=True)
class ServerPool:
    """How many requests a stack can serve at once, and why (or why nothing is known)."""

    servers: int  # 0: no fixed pool
    words: str  # "1 worker × 8 threads", or why there is no prediction
    workers: int = 1
    threads: int = 1
    pool: int | None = None  # the db workload's connection pool, where it is smaller


def stack_pool(family: str, workers: int, threads: int, db_pool: int | None = None) -> ServerPool:
    """A stack's pool from its definition (family, workers, threads) and, for the db
    workload, the app's database pool."""
    if family not in FIXED_POOL:
        return ServerPool(0, f"no prediction: not a fixed pool ({family} server)")
    workers, threads = max(1, workers), max(1, threads)
    servers = workers * threads
    w = f"{workers} worker{'s' if workers != 1 else ''}"
    words = w if threads == 1 else f"{w} × {threads} threads"
    if db_pool is not None and 0 < db_pool < servers:
        return ServerPool(db_pool, f"{words}, {db_pool} db connections", workers, threads, db_pool)
    return ServerPool(servers, words, workers, threads, db_pool)


def service_us(steps: Sequence[StepResult], servers: int) -> tuple[float | None, str]:
    """The service time from the first levels, µs, and where it comes from: the median
    at the lowest level measured enough with no more clients than servers; else the
    fastest answer seen at any level (a lower bound)."""
    calm = sorted(
        (s for s in steps if s.enough and s.level <= servers and s.window.latency.count),
        key=lambda s: s.level,
    )
    if calm:
        s = calm[0]
        return float(s.p50_us), f"median at c={s.level:,}"
    best = min((f for s in steps if (f := fastest_us(s))), default=None)
    return (float(best), "fastest answer") if best else (None, "")


def predict_knee(
    pool: ServerPool,
    steps: Sequence[StepResult],
    *,
    cpu_us_per_request: float | None = None,
    cores: int | None = None,
) -> KneePrediction | None:
    """Where the stack must start queueing (None: no fixed pool, or no service time
    measured yet). `cpu_us_per_request` and `cores`: the CPU cap, where known."""
    if pool.servers <= 0:
        return None
    service, source = service_us(steps, pool.servers)
    if not service or service <= 0:
        return None
    servers = float(pool.servers)
    basis = f"{pool.words}, ~{secs(service)} each ({source})"
    if cpu_us_per_request and cores and cpu_us_per_request > 0:
        # each request in service holds this share of a core: the cores serve at most
        # cores / share at once, whatever the pool
        share = min(1.0, cpu_us_per_request / service)
        by_cpu = cores / share if share > 0 else servers
        if by_cpu < servers:
            servers = by_cpu
            basis += f"; the CPU caps it at ~{by_cpu:.1f} at once on {cores} core(s)"
    rate = servers / (service / 1e6)
    return KneePrediction(
        servers=pool.servers,
        service_ms=service / 1000,
        rate=rate,
        concurrency=max(1.0, servers),
        basis=basis,
    )


def knee_miss(
    pred: KneePrediction,
    *,
    broke_at: int | None,
    below: int | None,
    peak_rps: float | None,
    rate_mode: bool = False,
) -> str:
    """ "" when the measured knee agrees with the prediction within ±25 %; else one
    line saying how far off it came (the caller points at the evidence window at the
    breaking level, which says why).

    The measured knee is the plateau of its goodput (`peak_rps`, once it broke at
    `broke_at`: the load passed the knee), compared with the predicted capacity. Not
    the breaking level itself: the rules call a level queueing only once a request
    waits several service times (rules/level.py), so a one-worker server predicted to
    queue from c≈1 is judged broken at c=5, as it should be. `below`: the last level
    measured below the break, said with it."""
    if broke_at is None or peak_rps is None or peak_rps <= 0:
        return ""
    off = peak_rps / pred.rate - 1
    if abs(off) <= OFF_BY:
        return ""
    where = level_text(broke_at, rate_mode)
    seen = f"between {level_text(below, rate_mode)} and {where}" if below else f"by {where}"
    return (
        f"knee off the prediction: its req/s levelled at {peak_rps:,.0f} ({seen}), "
        f"{off:+.0%} from the predicted ~{pred.rate:,.0f}"
    )
