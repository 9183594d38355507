"""A synthetic, deterministic engine and launcher, for tests, screenshots and the UI bench.

`SyntheticEngine` implements the `LoadEngine` protocol without sockets: each `step()`
publishes the next `EngineSnapshot` from a queueing model of each stack (workers, service
time, backlog). Nothing depends on the wall clock, so N steps always give the same
figures. `SyntheticLauncher` hands out stacks that start after a few steps, and one kind
that crashes. No Textual here: the bench imports it headless.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import msgspec

from stackrace.engine.histogram import LatencyHistogram
from stackrace.engine.model import (
    REFUSED,
    RESET,
    TIMEOUT,
    EngineSnapshot,
    LatencySummary,
    TargetSnapshot,
    TargetSpec,
    WindowStats,
)
from stackrace.session import Resources, StackChoice, StackState

TICK = 0.25  # seconds of simulated time per step


@dataclass(frozen=True)
class StackModel:
    """How a simulated stack behaves: `workers` requests in service at once, each taking
    `service_ms`; `backlog` more may queue; beyond that connections are refused/reset."""

    name: str
    family: str
    workers: int
    service_ms: float
    backlog: int = 2048
    base_rss_mb: float = 40.0
    per_conn_kb: float = 4.0
    start_steps: int = 4  # steps spent starting
    crash_at: int | None = None  # step at which it crashes


MODELS: dict[str, StackModel] = {
    "gunicorn-sync": StackModel("gunicorn sync", "prefork", 4, 11.0, 64, 80.0, 0.5),
    "gunicorn-gevent": StackModel("gunicorn+gevent", "green threads", 1000, 11.0, 2048, 95, 16),
    "uvicorn": StackModel("uvicorn", "asyncio", 5000, 10.6, 2048, 38.0, 6.0),
    "aiohttp": StackModel("aiohttp", "asyncio", 5000, 10.8, 2048, 42.0, 8.0, start_steps=6),
    "tornado": StackModel("tornado", "asyncio", 3000, 11.5, 1024, 35.0, 9.0),
    "go": StackModel("go net/http", "goroutines", 20000, 10.2, 4096, 8.0, 3.0, start_steps=1),
    "bjoern": StackModel("bjoern", "single thread", 1, 10.1, 16, 12.0, 0.2, crash_at=40),
    "uwsgi": StackModel("uWSGI", "prefork", 4, 10.9, 100, 60.0, 0.5),
}

CATALOG: list[StackChoice] = [
    StackChoice("gunicorn-sync", "gunicorn sync", "prefork", default=True),
    StackChoice("gunicorn-gevent", "gunicorn+gevent", "green threads", default=True),
    StackChoice("uvicorn", "uvicorn", "asyncio", default=True),
    StackChoice("aiohttp", "aiohttp", "asyncio", default=True),
    StackChoice("tornado", "tornado", "asyncio"),
    StackChoice("go", "go net/http", "goroutines"),
    StackChoice("bjoern", "bjoern", "single thread"),
    StackChoice("uwsgi", "uWSGI", "prefork"),
    StackChoice(
        "php-fpm", "PHP-FPM + nginx", "prefork", available=False, reason="php-fpm8.2 not found"
    ),
    StackChoice("granian", "granian", "rust", available=False, reason="granian not installed"),
]


def _latency(model: StackModel, level: int) -> LatencySummary:
    """Closed loop at `level` connections: Little's law past saturation, tails widen."""
    base = model.service_ms * 1000
    served = min(level, model.workers + model.backlog)
    if level <= model.workers:
        p50 = base * (1 + 0.02 * math.log10(level + 1))
        spread = 1.15
    else:
        p50 = base * served / model.workers
        spread = 1.6 + 0.2 * math.log10(served / model.workers + 1)
    return LatencySummary(
        count=1,
        mean=p50 * 1.05,
        p50=int(p50),
        p90=int(p50 * (1 + (spread - 1) * 0.5)),
        p99=int(p50 * spread),
        p999=int(p50 * spread * 1.3),
        max=int(p50 * spread * 1.8),
        min=int(base * 0.95),
    )


def _rps(model: StackModel, level: int) -> float:
    served = min(level, model.workers + model.backlog)
    capacity = model.workers * 1000 / model.service_ms
    return min(served * 1000 / model.service_ms, capacity)


class _SimTarget:
    def __init__(self, spec: TargetSpec, model: StackModel) -> None:
        self.spec = spec
        self.model = model
        self.concurrency = spec.concurrency
        self.rate = spec.rate
        self.total_requests = 0
        self.total_failures: dict[str, int] = {}
        self.total_seconds = 0.0
        self.counting_after = 0
        self.dead = False

    def window(self, step: int) -> WindowStats:
        if self.dead:
            return WindowStats(seconds=TICK, failures={REFUSED: 40 * self.concurrency})
        level = self.concurrency
        if self.rate is None:
            rps = _rps(self.model, level)
            lat = _latency(self.model, level)
        else:
            # an open loop keeps rate x service time requests in flight (Little's law)
            rps = min(self.rate, _rps(self.model, 10**6))
            lat = _latency(self.model, max(1, int(self.rate * self.model.service_ms / 1000)))
        # a little deterministic wobble so sparklines look alive
        rps *= 1 + 0.03 * math.sin(step * 0.7 + len(self.spec.id))
        requests = int(rps * TICK)
        lat = msgspec.structs.replace(lat, count=requests)
        failures: dict[str, int] = {}
        over = level - (self.model.workers + self.model.backlog)
        if self.rate is None and over > 0:
            failures[REFUSED] = int(over * 40 * TICK)
            failures[RESET] = int(over * 4 * TICK)
            if level > 2000:
                failures[TIMEOUT] = int(level / 500)
        return WindowStats(
            seconds=TICK,
            requests=requests,
            ok=requests,
            rps=requests / TICK,
            bytes=requests * 150,
            failures=failures,
            status={200: requests} if requests else {},
            latency=lat,
            latency_uncorrected=(
                msgspec.structs.replace(
                    lat, p99=int(lat.p99 * 0.6), p999=int(lat.p999 * 0.5), max=int(lat.max * 0.5)
                )
                if self.rate is not None
                else None
            ),
        )


class SyntheticEngine:
    """The LoadEngine protocol, with figures from `StackModel`s, one snapshot per step()."""

    def __init__(self, models: dict[str, StackModel] | None = None) -> None:
        self.models = models or {}
        self.latest: EngineSnapshot | None = None
        self.errors: list[str] = []
        self._targets: dict[str, _SimTarget] = {}
        self._step = 0
        self.started = False
        self.commands: list[tuple[str, object]] = []  # what the driver asked, for tests

    def clock(self) -> float:
        return self._step * TICK

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> EngineSnapshot | None:
        self.started = False
        return self.latest

    def model_for(self, target_id: str) -> StackModel:
        return self.models.get(target_id) or MODELS.get(target_id) or MODELS["uvicorn"]

    async def add_target(self, spec: TargetSpec) -> None:
        self._targets[spec.id] = _SimTarget(spec, self.model_for(spec.id))
        self.commands.append(("add", spec.id))

    async def remove_target(self, target_id: str) -> None:
        self._targets.pop(target_id, None)
        self.commands.append(("remove", target_id))

    async def set_concurrency(self, n: int, target_id: str | None = None) -> None:
        for tid, t in self._targets.items():
            if target_id in (None, tid):
                t.concurrency = n
        self.commands.append(("concurrency", n))

    async def set_rate(self, rate: float | None, target_id: str | None = None) -> None:
        for tid, t in self._targets.items():
            if target_id in (None, tid):
                t.rate = rate
        self.commands.append(("rate", rate))

    def reset_totals(self, warmup: float = 0.0) -> None:
        for t in self._targets.values():
            t.total_requests = 0
            t.total_failures = {}
            t.total_seconds = 0.0
            t.counting_after = self._step + math.ceil(warmup / TICK)

    def total_histogram(self, target_id: str, uncorrected: bool = False) -> LatencyHistogram:
        t = self._targets[target_id]
        lat = t.window(self._step).latency
        hist = LatencyHistogram()
        # a log-normal-ish body with the model's tail: enough for a percentile curve
        anchors = [
            (0.0, lat.min),
            (0.5, lat.p50),
            (0.9, lat.p90),
            (0.99, lat.p99),
            (0.999, lat.p999),
            (1.0, lat.max),
        ]
        for i in range(400):
            q = (i + 0.5) / 400
            for (q0, v0), (q1, v1) in itertools.pairwise(anchors):
                if q0 <= q <= q1:
                    f = (q - q0) / (q1 - q0)
                    hist.record(max(1, int(v0 * (v1 / max(v0, 1)) ** f)))
                    break
        return hist

    def crash(self, target_id: str) -> None:
        self._targets[target_id].dead = True

    def step(self, n: int = 1) -> EngineSnapshot | None:
        """Advance n intervals and publish the last snapshot."""
        for _ in range(n):
            self._step += 1
            targets = []
            for tid, t in self._targets.items():
                w = t.window(self._step)
                if self._step > t.counting_after:
                    t.total_requests += w.requests
                    t.total_seconds += w.seconds
                    for k, v in w.failures.items():
                        t.total_failures[k] = t.total_failures.get(k, 0) + v
                total = WindowStats(
                    seconds=t.total_seconds,
                    requests=t.total_requests,
                    ok=t.total_requests,
                    rps=t.total_requests / t.total_seconds if t.total_seconds else 0.0,
                    failures=dict(t.total_failures),
                    latency=w.latency,
                    latency_uncorrected=w.latency_uncorrected,
                )
                targets.append(
                    TargetSnapshot(
                        id=tid,
                        url=t.spec.url,
                        concurrency=t.concurrency,
                        connections=0 if t.dead else t.concurrency,
                        rate=t.rate,
                        interval=w,
                        total=total,
                    )
                )
            busy = sum(x.interval.rps for x in targets) / 1500.0  # % of one core, roughly
            self.latest = EngineSnapshot(
                seq=self._step,
                elapsed=self._step * TICK,
                warming=False,
                paused=False,
                procs=1,
                engine_cpu=min(100.0, busy),
                engine_cpu_max=min(100.0, busy),
                saturated=busy >= 90.0,
                targets=targets,
            )
        return self.latest


@dataclass
class SyntheticStack:
    """A StackHandle whose state and resources follow the engine's step count."""

    id: str
    name: str
    family: str
    engine: SyntheticEngine
    model: StackModel
    started_step: int = 0
    log: list[str] = field(default_factory=list)

    @property
    def _age(self) -> int:
        return self.engine._step - self.started_step

    @property
    def state(self) -> StackState:
        if self.model.crash_at is not None and self._age >= self.model.crash_at:
            return StackState.CRASHED
        if self._age < self.model.start_steps:
            return StackState.STARTING
        return StackState.READY

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{18000 + abs(hash(self.id)) % 1000}/"

    def log_tail(self, lines: int = 20) -> list[str]:
        out = [f"[{self.name}] listening on {self.base_url}"]
        if self.state == StackState.CRASHED:
            out += [
                "Traceback (most recent call last):",
                '  File "app.py", line 42, in handle',
                "MemoryError: cannot allocate connection buffer",
                f"[{self.name}] worker exited with code 1",
            ]
        return out[-lines:]

    def resources(self) -> Resources | None:
        if self.state == StackState.STARTING:
            return None
        t = self.engine._targets.get(self.id)
        conns = t.concurrency if t is not None else 0
        rss = (self.model.base_rss_mb * 1024 + conns * self.model.per_conn_kb) * 1024
        cpu = 0.0
        if t is not None and not t.dead:
            cpu = min(100.0 * 2, _rps(self.model, conns) / 80)
        return Resources(rss=int(rss), uss=int(rss * 0.8), cpu=cpu)


class SyntheticLauncher:
    def __init__(self, engine: SyntheticEngine) -> None:
        self.engine = engine
        self.stacks: dict[str, SyntheticStack] = {}

    def catalog(self) -> list[StackChoice]:
        return list(CATALOG)

    async def start(self, stack_id: str) -> SyntheticStack:
        model = self.engine.model_for(stack_id)
        stack = SyntheticStack(
            stack_id, model.name, model.family, self.engine, model, self.engine._step
        )
        self.stacks[stack_id] = stack
        return stack

    async def stop_all(self) -> None:
        self.stacks.clear()


def synthetic_session(models: dict[str, StackModel] | None = None):  # -> Session
    """A Session over the synthetic engine and launcher, clocked by the engine's steps."""
    from stackrace.session import Session

    engine = SyntheticEngine(models)
    return Session(engine=engine, launcher=SyntheticLauncher(engine), clock=engine.clock)
