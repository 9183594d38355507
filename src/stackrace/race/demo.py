"""`stackrace --demo`: a synthetic race, no servers and no load — clearly labelled so.

Everything it shows is a model, and the app says so everywhere (the header, each pane,
the picker, screenshots): the engine carries `synthetic = True` and the session passes
that on to every view.

`SyntheticEngine` implements the core's `LoadEngine` without sockets: each `step()`
publishes the next `EngineSnapshot` from a queueing model of each stack (workers, a
service time, a listen backlog). Its figures obey the same physics as a real race:
a closed loop of C connections against W workers serving in s ms answers min(C, W)/s
requests a second, every client always has a request waiting (Little's law:
C = req/s × latency), latency grows linearly past W, a client whose wait would pass the
request timeout times out (so C = answers × their latency + timeouts × the timeout),
connections past workers + listen backlog are refused, and a rate above capacity builds
a backlog of unsent requests that are late and finally dropped at the timeout. A JIT
model (`warm_s`) serves at a third of its speed at first and reaches full speed over
`warm_s` seconds of load. A variant id (`gunicorn-sync:workers=4`) changes the workers.
Nothing depends on the wall clock, so N steps always give the same figures; tests,
screenshots and the UI benchmark use it. `DemoSource` hands out stacks that start after
a few steps, and one that crashes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stackrace.config import Tunable
from stackrace.engine.aggregate import WindowSum
from stackrace.engine.histogram import LatencyHistogram, SparseHistogram, index_of
from stackrace.engine.model import (
    DROPPED,
    REFUSED,
    TIMEOUT,
    EngineSnapshot,
    LatencySummary,
    TargetSnapshot,
    TargetSpec,
    WindowStats,
)
from stackrace.race.core import StackChoice
from stackrace.race.state import StackState
from stackrace.stacks.listen import ListenState
from stackrace.stacks.sampler import ResourceSample
from stackrace.stacks.signs import ServerSigns

if TYPE_CHECKING:
    from stackrace.race.session import Session

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
CATALOG: list[StackChoice] = [
    StackChoice(
        k,
        m.name,
        m.family,
        default=k in ("gunicorn-sync", "gunicorn-gevent", "uvicorn", "aiohttp"),
        description=describe(m),
        workers=1,  # processes, as a stack's `workers` (a model's `workers` is concurrency)
        tunables=(Tunable("workers", "1", numeric=True),),
    )
    for k, m in MODELS.items()
]


def _summary(latency_us: float, spread: float, count: int) -> LatencySummary:
    p50 = latency_us
    return LatencySummary(
        count=count,
        mean=p50 * 1.03,
        p50=int(p50),
        p90=int(p50 * (1 + (spread - 1) * 0.5)),
        p99=int(p50 * spread),
        p999=int(p50 * spread * 1.2),
        max=int(p50 * spread * 1.5),
        min=int(p50 * 0.9),
    )


class _SimTarget:
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
        lat = _summary(latency, spread, answered)
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
            lag=_summary(60.0, 2.0, 40),
            engine_cpu=min(100.0, answered / TICK * ENGINE_US_PER_REQUEST / 1e4),
        )
        return w, hist

    def add_to_total(self, w: WindowStats, hist: SparseHistogram) -> None:
        self.total_hist.add(hist)
        self.total_sum.add(w, self.total_hist.summary())

    @property
    def total(self) -> WindowStats:
        """The running totals: the intervals added by the one window arithmetic
        (engine/aggregate.py WindowSum); `stale` is the model's own estimate."""
        t = self.total_sum.stats()
        # waiting longer than the level has run: clients with no answer in all of it
        age = t.oldest_wait_us
        t.stale = int(t.waiting * max(0.0, 1 - t.seconds * 1e6 / age)) if age else 0
        return t


class SyntheticEngine:
    """The LoadEngine protocol, with figures from `StackModel`s, one snapshot per step()."""

    synthetic = True

    def __init__(self, models: dict[str, StackModel] | None = None, timeout: float = 10.0):
        self.models = models or {}
        self.timeout = timeout
        self.latest: EngineSnapshot | None = None
        self.errors: list[str] = []
        self.targets: dict[str, _SimTarget] = {}
        self.steps = 0
        self.started = False

    def clock(self) -> float:
        return self.steps * TICK

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> EngineSnapshot | None:
        self.started = False
        return self.latest

    def model_for(self, target_id: str) -> StackModel:
        if target_id in self.models:
            return self.models[target_id]
        base, _, options = target_id.partition(":")
        model = self.models.get(base) or MODELS.get(base) or MODELS["uvicorn"]
        for opt in options.split(","):
            key, _, value = opt.partition("=")
            if key == "workers" and value.isdigit():
                import dataclasses

                # n worker processes: n requests in service at once for a sync model; an
                # async one already serves many at once, and gets n cores' worth of CPU
                n = int(value)
                if model.workers >= 10_000:
                    model = dataclasses.replace(model, cpu_ms=model.cpu_ms / n)
                else:
                    model = dataclasses.replace(model, workers=n)
                model = dataclasses.replace(model, name=f"{model.name} ×{n}")
        return model

    async def add_target(
        self, spec: TargetSpec, cpus: Sequence[int] | None = None, procs: int | None = None
    ) -> None:
        self.targets[spec.id] = _SimTarget(spec, self.model_for(spec.id), self.timeout)

    async def remove_target(self, target_id: str) -> None:
        self.targets.pop(target_id, None)

    def _each(self, target_id: str | None) -> list[_SimTarget]:
        return [t for tid, t in self.targets.items() if target_id in (None, tid)]

    async def set_concurrency(self, n: int, target_id: str | None = None) -> None:
        for t in self._each(target_id):
            t.concurrency = n

    async def set_rate(self, rate: float | None, target_id: str | None = None) -> None:
        for t in self._each(target_id):
            t.rate = rate
            t.unsent = 0.0

    async def set_budget(self, n: int | None, target_id: str | None = None) -> None:
        """Budgets are bench's; the demo runs only the app."""

    def reset_totals(self, warmup: float = 0.0, target_id: str | None = None) -> None:
        for t in self._each(target_id):
            t.total_sum = WindowSum()
            t.total_hist = SparseHistogram()
            t.counting_after = self.steps + math.ceil(warmup / TICK)

    def total_histogram(self, target_id: str, uncorrected: bool = False) -> LatencyHistogram:
        return self.targets[target_id].total_hist.to_dense()

    def total_percentiles(
        self, target_id: str, points: Sequence[float], uncorrected: bool = False
    ) -> list[int]:
        return self.targets[target_id].total_hist.percentiles(points)

    def crash(self, target_id: str) -> None:
        self.targets[target_id].dead = True

    def step(self, n: int = 1) -> EngineSnapshot | None:
        """Advance n intervals and publish the last snapshot."""
        for _ in range(n):
            self.steps += 1
            targets = []
            for tid, t in self.targets.items():
                w, hist = t.window(self.steps)
                if self.steps > t.counting_after:
                    t.add_to_total(w, hist)
                targets.append(
                    TargetSnapshot(
                        id=tid,
                        url=t.spec.url,
                        concurrency=t.concurrency,
                        connections=0 if t.dead else t.concurrency,
                        rate=t.rate,
                        interval=w,
                        total=msgspec_copy(t.total),
                        keepalive=t.spec.keepalive,
                    )
                )
            busy = sum(x.interval.engine_cpu for x in targets)
            self.latest = EngineSnapshot(
                seq=self.steps,
                elapsed=self.steps * TICK,
                warming=False,
                paused=False,
                procs=max(1, len(targets)),
                engine_cpu=busy,
                engine_cpu_max=max((x.interval.engine_cpu for x in targets), default=0.0),
                saturated=False,
                targets=targets,
            )
        return self.latest


def msgspec_copy(w: WindowStats) -> WindowStats:
    import msgspec

    return msgspec.structs.replace(w, failures=dict(w.failures), status=dict(w.status))


@dataclass
class SyntheticStack:
    """A MemberHandle whose state and resources follow the engine's step count."""

    id: str
    name: str
    family: str
    engine: SyntheticEngine
    model: StackModel
    started_step: int = 0
    external: bool = False
    log: list[str] = field(default_factory=list)

    @property
    def _age(self) -> int:
        return self.engine.steps - self.started_step

    @property
    def state(self) -> StackState:
        if self.model.crash_at is not None and self._age >= self.model.crash_at:
            return StackState.CRASHED
        if self._age < self.model.start_steps:
            return StackState.STARTING
        return StackState.READY

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{18000 + sum(map(ord, self.id)) % 1000}"

    listen_port = None  # a model: no socket to ask the kernel about
    error = None  # a model's crash is its state and its log

    def signs(self, now: float, listen: ListenState | None) -> ServerSigns | None:
        return None

    @property
    def cacert(self) -> str | None:
        return None

    def log_tail(self, lines: int = 20) -> list[str]:
        out = [f"[{self.name}] (synthetic) listening on {self.base_url}"]
        if self.state == StackState.CRASHED:
            out += [
                "Traceback (most recent call last):",
                '  File "app.py", line 42, in handle',
                "MemoryError: cannot allocate connection buffer",
                f"[{self.name}] worker exited with code 1",
            ]
        return out[-lines:]

    def sample(self) -> ResourceSample | None:
        if self.state == StackState.STARTING:
            return None
        t = self.engine.targets.get(self.id)
        conns = t.concurrency if t is not None else 0
        rss = int((self.model.base_rss_mb * 1024 + conns * self.model.per_conn_kb) * 1024)
        cpu = 0.0
        seconds = 0.0
        if t is not None and not t.dead:
            # one core; a JIT still warming spends more CPU per request. From the last
            # interval, as a sampler sees the CPU now (the level's totals restart at
            # every level change, the process does not)
            cpu = min(100.0, t.last_rps * self.model.cpu_ms / t.speed() / 10)
            seconds = t.cpu_seconds
        return ResourceSample(
            self.engine.clock(), rss, int(rss * 0.8), int(rss * 0.85), cpu, 1, 1, seconds, 0.0
        )

    async def stop(self) -> None:
        pass


class DemoSource:
    """The StackSource of the demo: synthetic stacks."""

    def __init__(self, engine: SyntheticEngine) -> None:
        self.engine = engine
        self.stacks: dict[str, SyntheticStack] = {}

    def catalog(self) -> list[StackChoice]:
        return list(CATALOG)

    def start(self, stack_id: str, cpus: list[int] | None) -> SyntheticStack:
        model = self.engine.model_for(stack_id)
        stack = SyntheticStack(
            stack_id, model.name, model.family, self.engine, model, self.engine.steps
        )
        self.stacks[stack_id] = stack
        return stack

    def host_lost(self) -> str:
        return ""  # a model: no host to lose

    async def start_database(self) -> None:
        """The demo needs no database."""

    def database_state(self) -> str:
        return ""  # no database

    async def close(self) -> None:
        self.stacks.clear()


def demo_session(models: dict[str, StackModel] | None = None) -> Session:
    """A Session over the synthetic engine, clocked by the engine's steps."""
    from stackrace.race.core import RaceCore
    from stackrace.race.session import Session

    engine = SyntheticEngine(models)
    # resources once a simulated second, as a live race samples them
    core = RaceCore(engine, DemoSource(engine), clock=engine.clock, sample_every=1.0)
    return Session(core)
