"""The demo's physics: how a simulated stack answers a closed loop, a rate or a budget.

`ModelTarget` is one target of the synthetic engine (race/live/demo.py): each `window()` is
the next interval of a queueing model of the stack (workers, a service time, a listen
backlog). Its figures obey the same physics as a real race: a closed loop of C
connections against W workers serving in s ms answers min(C, W)/s requests a second,
every client always has a request waiting (Little's law: C = req/s × latency), latency
grows linearly past W, a client whose wait would pass the request timeout times out (so
C = answers × their latency + timeouts × the timeout), connections past workers +
listen backlog are refused, and a rate above capacity builds a backlog of unsent
requests that are late and finally dropped at the timeout. A JIT model (`warm_s`)
serves at a third of its speed at first and reaches full speed over `warm_s` seconds of
load. A request budget (bench's `--requests`, as ab -n) sends at most that many more,
each client sending again as it is answered, so a budget of 0 drains what is in flight
within an interval or two, as a real drain does.

Apart from the engine so that each module keeps one job: the engine publishes
snapshots and keeps time, this says what a stack does with its load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stackrace.engine.histogram import SparseHistogram, index_of
from stackrace.engine.model import (
    DROPPED,
    REFUSED,
    TIMEOUT,
    LatencySummary,
    TargetSpec,
    WindowStats,
)
from stackrace.engine.window_sum import WindowSum

TICK = 0.25  # seconds of simulated time per step
ENGINE_US_PER_REQUEST = 15.0  # what the real engine costs per request (bench/engine_vs_wrk)


@dataclass(frozen=True)
class StackModel:
    """How a simulated stack behaves: `workers` requests in service at once, each taking
    `service_ms` of which `cpu_ms` on a core; a listen backlog of `backlog`."""

    name: str
    family: str
    workers: int
    service_ms: float
    cpu_ms: float
    backlog: int = 2048
    base_rss_mb: float = 40.0
    per_conn_kb: float = 4.0
    start_steps: int = 4  # steps spent starting
    crash_at: int | None = None  # step at which it crashes
    warm_s: float = 0.0  # a JIT: seconds of load until full speed (a third of it at first)


MODELS: dict[str, StackModel] = {
    # gunicorn's default listen backlog is 2048: its one sync worker queues, it does not
    # refuse; uWSGI's is 100, so it refuses past that
    "gunicorn-sync": StackModel("gunicorn sync", "sync", 1, 11.0, 0.9, 2048, 44.0, 0.0),
    "gunicorn-gevent": StackModel("gunicorn gevent", "greenlet", 10_000, 11.0, 0.25, 2048, 55, 9),
    "uvicorn": StackModel("uvicorn", "async", 10_000, 10.6, 0.15, 2048, 30.0, 6.0),
    "aiohttp": StackModel("aiohttp", "async", 10_000, 10.8, 0.2, 2048, 38.0, 8.0, start_steps=6),
    "tornado": StackModel("Tornado", "async", 10_000, 11.5, 0.3, 1024, 28.0, 9.0),
    "go-nethttp": StackModel("Go net/http", "async", 100_000, 10.2, 0.04, 4096, 8.0, 3.0, 1),
    "bjoern": StackModel("bjoern", "event-loop", 1, 10.1, 0.05, 16, 12.0, 0.2, crash_at=40),
    "uwsgi": StackModel("uWSGI", "prefork", 1, 10.9, 0.8, 100, 24.0, 0.5),
    "gunicorn-pypy": StackModel(
        "gunicorn PyPy", "greenlet", 10_000, 10.8, 0.12, 2048, 70.0, 6.0, 8, warm_s=20.0
    ),
}


def describe(m: StackModel) -> str:
    workers = "unlimited" if m.workers >= 10_000 else f"{m.workers}"
    out = (
        f"synthetic model: {workers} worker(s), {m.service_ms:g} ms per request "
        f"({m.cpu_ms:g} ms CPU), backlog {m.backlog}"
    )
    return out + (f", JIT warm-up {m.warm_s:g} s" if m.warm_s else "")


# The demo's stacks are models, not the installed stacks: the picker shows each as
# "synthetic" with its model, and never says whether a real stack is installed.


def _summary(
    latency_us: float, spread: float, count: int, fastest_us: float | None = None
) -> LatencySummary:
    """The latency figures of `count` answers about `latency_us` (their fastest: the
    stack's service time when given, else a little under the median)."""
    p50 = latency_us
    return LatencySummary(
        count=count,
        mean=p50 * 1.03,
        p50=int(p50),
        p90=int(p50 * (1 + (spread - 1) * 0.5)),
        p99=int(p50 * spread),
        p999=int(p50 * spread * 1.2),
        max=int(p50 * spread * 1.5),
        min=int(fastest_us if fastest_us is not None else p50 * 0.9),
    )


class ModelTarget:
    """One stack under load, interval by interval (see the module's docstring)."""

    def __init__(self, spec: TargetSpec, model: StackModel, timeout: float) -> None:
        self.spec = spec
        self.model = model
        self.timeout = timeout
        self.concurrency = spec.concurrency
        self.rate = spec.rate
        self.unsent = 0.0
        self.waiting = 0
        self.total_sum = WindowSum()
        self.total_hist = SparseHistogram()
        self.counting_after = 0
        self.dead = False
        self.loaded_s = 0.0  # seconds of load so far (a JIT model warms with it)
        self.timeouts_due = 0.0
        self.last_rps = 0.0  # the last interval's answers a second (what the CPU did)
        self.cpu_seconds = 0.0  # the process's CPU time so far
        self.budget_left: int | None = None  # sends left under a budget (None: no limit)

    def speed(self) -> float:
        """A JIT model's share of its full speed: a third at first, all after warm_s."""
        w = self.model.warm_s
        if w <= 0:
            return 1.0
        return min(1.0, 1 / 3 + (2 / 3) * self.loaded_s / w)

    @property
    def capacity(self) -> float:
        """Answers a second at most: workers / service time, and one core's CPU."""
        m = self.model
        return min(m.workers * 1000 / m.service_ms, 1000 / m.cpu_ms)

    def window(self, step: int) -> tuple[WindowStats, SparseHistogram]:
        m = self.model
        carried = self.waiting
        if self.dead:
            refused = int(self.concurrency / 0.01 * TICK) if self.rate is None else 0
            self.waiting = 0
            return WindowStats(
                seconds=TICK,
                sent=carried + refused,
                carried_in=carried,
                failures={REFUSED: refused + carried},
            ), SparseHistogram()
        wobble = 1 + 0.02 * math.sin(step * 0.7 + len(self.spec.id))
        speed = self.speed()
        self.loaded_s += TICK
        failures: dict[str, int] = {}
        unsent = 0
        stale = 0
        if self.rate is None:
            # past workers + listen backlog, connects are refused (each client retries
            # every 10 ms, as the engine does); the rest wait in the queue
            c = min(self.concurrency, m.workers + m.backlog)
            over = self.concurrency - c
            if over > 0:
                failures[REFUSED] = int(over * TICK / 0.01)
            busy = min(c, m.workers)
            served = min(busy * 1000 / m.service_ms, self.capacity * speed) * wobble
            latency = c / served * 1e6 if served else 0.0  # Little's law
            if latency > 0.9 * self.timeout * 1e6:
                # FIFO: the answers that make it took about the timeout; the rest of the
                # clients time out, so C = answers × 0.9 T + timeouts × T (Little)
                latency = 0.9 * self.timeout * 1e6
                timeouts = max(0.0, (c - served * 0.9 * self.timeout) / self.timeout)
                self.timeouts_due += timeouts * TICK
                if self.timeouts_due >= 1:
                    failures[TIMEOUT] = int(self.timeouts_due)
                    self.timeouts_due -= int(self.timeouts_due)
            spread = 1.2 if c <= m.workers else 1.05
            waiting = c
            # clients waiting longer than the interval: no answer at all in it
            stale = int(waiting * max(0.0, 1 - TICK * 1e6 / latency)) if latency else 0
            if self.budget_left is not None:
                served, waiting = self._budgeted(c, carried, served)
                failures, stale = {}, 0
        else:
            # open loop: this tick's sends plus the backlog are the work on offer; the
            # stack serves what its capacity allows and never more than was asked
            due = self.rate * TICK + self.unsent
            done = min(due, self.capacity * speed * wobble * TICK)
            served = done / TICK
            self.unsent = due - done
            limit = self.rate * self.timeout
            if self.unsent > limit:
                failures[DROPPED] = int(self.unsent - limit)
                self.unsent = limit
            unsent = int(self.unsent)
            behind = self.unsent / served if served else 0.0
            latency = m.service_ms * 1000 + behind * 1e6
            spread = 1.3
            waiting = int(served * m.service_ms / 1000) + unsent
        answered = int(served * TICK)
        self.waiting = waiting
        self.last_rps = served
        self.cpu_seconds += answered * m.cpu_ms / 1000 / speed
        # the fastest answer is one served at once, as a level started from idle serves
        # its first: the rules read the service time from it (stackrace.rules.level)
        lat = _summary(latency, spread, answered, min(latency, m.service_ms * 1000))
        hist = SparseHistogram()
        for q, v in ((0.5, lat.p50), (0.4, lat.p90), (0.09, lat.p99), (0.01, lat.max)):
            n = int(answered * q)
            if n:
                hist.counts[index_of(v)] = hist.counts.get(index_of(v), 0) + n
        lost = sum(failures.values())
        w = WindowStats(
            seconds=TICK,
            sent=answered + lost + waiting,
            carried_in=carried,
            waiting=waiting,
            unsent=unsent,
            oldest_wait_us=int(latency),
            stale=stale,
            requests=answered,
            ok=answered,
            rps=answered / TICK,
            bytes=answered * 150,
            failures=failures,
            status={200: answered} if answered else {},
            latency=lat,
            latency_uncorrected=_summary(m.service_ms * 1000, 1.2, answered)
            if self.rate is not None
            else None,
            late=answered if unsent else 0,
            # requests in flight on average (Little's L): every client in a closed loop,
            # those in service and due in an open one
            in_flight=float(waiting),
            lag=_summary(60.0, 2.0, 40),
            engine_cpu=min(100.0, answered / TICK * ENGINE_US_PER_REQUEST / 1e4),
        )
        return w, hist

    def _budgeted(self, c: int, carried: int, served: float) -> tuple[float, int]:
        """Answers a second and requests in flight under a budget: new sends fill the
        free connections and follow the answers, until the budget is spent."""
        can_answer = int(served * TICK)
        left = self.budget_left or 0
        new = min(left, max(0, c - carried) + can_answer)
        self.budget_left = left - new
        in_flight = carried + new
        answered = min(can_answer, in_flight)
        return answered / TICK, in_flight - answered

    def add_to_total(self, w: WindowStats, hist: SparseHistogram) -> None:
        self.total_hist.add(hist)
        self.total_sum.add(w, self.total_hist.summary())

    @property
    def total(self) -> WindowStats:
        """The running totals: the intervals added by the one window arithmetic
        (engine/window_sum.py WindowSum); `stale` is the model's own estimate."""
        t = self.total_sum.stats()
        # waiting longer than the level has run: clients with no answer in all of it
        age = t.oldest_wait_us
        t.stale = int(t.waiting * max(0.0, 1 - t.seconds * 1e6 / age)) if age else 0
        return t
