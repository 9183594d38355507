"""`stackrace --demo`: a synthetic race, no servers and no load — clearly labelled so.

Everything it shows is a model, and the app says so everywhere (the header, each pane,
the picker, screenshots): the engine carries `synthetic = True` and the session passes
that on to every view.

`SyntheticEngine` implements the core's `LoadEngine` without sockets: each `step()`
publishes the next `EngineSnapshot`, each target's figures from the queueing model of
its stack (race/live/demo_model.py; a variant id, `gunicorn-sync:workers=4`, changes the
workers). Nothing depends on the wall clock, so N steps always give the same figures;
tests, screenshots and the UI benchmark use it. Its clock (`SteppedClock`, the race
core's clock on a synthetic race) reads the steps, and its sleep takes them: a driver
that waits on the core's clock (bench's levels, race/bench/protocol.py) makes the model's time
pass, so a whole bench runs in milliseconds (`synthetic_parts`). `DemoSource` hands out
stacks that start after a few steps, and one that crashes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec

from stackrace.engine.histogram import LatencyHistogram, SparseHistogram
from stackrace.engine.model import (
    EngineSettings,
    EngineSnapshot,
    TargetSnapshot,
    TargetSpec,
    WindowStats,
)
from stackrace.engine.window_sum import WindowSum
from stackrace.race.core.core import RaceCore
from stackrace.race.core.members import LoadEngine, RaceParts, StackChoice
from stackrace.race.core.state import StackState
from stackrace.race.live.demo_model import MODELS, TICK, ModelTarget, StackModel, describe
from stackrace.race.live.session import Session
from stackrace.stacks.definition import Stack
from stackrace.stacks.listen import ListenState
from stackrace.stacks.sampler import ResourceSample
from stackrace.stacks.signs import ServerSigns
from stackrace.stacks.tunables import Tunable

if TYPE_CHECKING:
    from stackrace.engine.aggregate import IntervalWatcher
    from stackrace.race.live.session import Session

__all__ = ["CATALOG", "MODELS", "TICK", "DemoSource", "StackModel", "SyntheticEngine"]

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


class SteppedClock:
    """The synthetic engine's time (race/core/clock.py): its steps, and a sleep that takes as
    many steps as that much time needs. A driver's waits are what move the model on, so
    nothing ever waits for real; a front end that steps the engine itself (the app's
    timer in `--demo`) only reads it."""

    def __init__(self, engine: SyntheticEngine) -> None:
        self.engine = engine

    def __call__(self) -> float:
        return self.engine.steps * TICK

    async def sleep(self, seconds: float) -> None:
        end = self() + seconds
        while self() < end:
            self.engine.step()
        await asyncio.sleep(0)  # a wait is a wait: other tasks run


class SyntheticEngine:
    """The LoadEngine protocol, with figures from `StackModel`s, one snapshot per step()."""

    synthetic = True

    def __init__(self, models: dict[str, StackModel] | None = None, timeout: float = 10.0):
        self.models = models or {}
        self.timeout = timeout
        self.latest: EngineSnapshot | None = None
        self.errors: list[str] = []
        self.targets: dict[str, ModelTarget] = {}
        self.steps = 0
        self.started = False
        self.clock = SteppedClock(self)
        self.watchers: list[IntervalWatcher] = []

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
        self.targets[spec.id] = ModelTarget(spec, self.model_for(spec.id), self.timeout)
        self.targets[spec.id].budget_left = spec.budget  # `load -n`: set with the target

    async def remove_target(self, target_id: str) -> None:
        self.targets.pop(target_id, None)

    def _each(self, target_id: str | None) -> list[ModelTarget]:
        return [t for tid, t in self.targets.items() if target_id in (None, tid)]

    async def set_concurrency(self, n: int, target_id: str | None = None) -> None:
        for t in self._each(target_id):
            t.concurrency = n

    async def set_rate(self, rate: float | None, target_id: str | None = None) -> None:
        for t in self._each(target_id):
            t.rate = rate
            t.unsent = 0.0

    async def set_budget(self, n: int | None, target_id: str | None = None) -> None:
        """Closed loop: at most n more requests per target (bench's --requests, and its
        drain: 0); None removes the limit."""
        for t in self._each(target_id):
            t.budget_left = n

    def reset_totals(self, warmup: float = 0.0, target_id: str | None = None) -> None:
        for t in self._each(target_id):
            t.total_sum = WindowSum()
            t.total_hist = SparseHistogram()
            t.counting_after = self.steps + math.ceil(warmup / TICK)

    def total_histogram(self, target_id: str, uncorrected: bool = False) -> LatencyHistogram:
        return self.targets[target_id].total_hist.to_dense()

    def engine_pids(self, target_id: str | None = None) -> list[int]:
        return []  # no process: a model's figures

    def watch_intervals(self, watcher: IntervalWatcher) -> None:
        self.watchers.append(watcher)

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
            hists: dict[str, SparseHistogram] = {}
            for tid, t in self.targets.items():
                w, hist = t.window(self.steps)
                hists[tid] = hist
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
            for watcher in self.watchers:
                watcher(self.latest, hists)
        return self.latest


def msgspec_copy(w: WindowStats) -> WindowStats:

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
    stopped: bool = False

    @property
    def _age(self) -> int:
        return self.engine.steps - self.started_step

    @property
    def state(self) -> StackState:
        if self.stopped:  # out of the race: never loaded again (bench's rotation)
            return StackState.STOPPED
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

    def exposed(self) -> list[str]:
        return []  # a model: no socket

    @property
    def cacert(self) -> str | None:
        return None

    @property
    def http(self) -> str:
        return "1.1"  # a model of a server: no protocol of its own

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
        self.stopped = True


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

    def start_stack(self, stack: Stack, cpus: list[int] | None) -> SyntheticStack:
        """A stack bench resolved: the model of its name (a variant's workers too)."""
        return self.start(stack.name, cpus)

    def use_database(self, env: dict[str, str]) -> None:
        """The models need no database."""

    async def start_database(self) -> None:
        """The demo needs no database."""

    def database_state(self) -> str:
        return ""  # no database

    async def close(self) -> None:
        self.stacks.clear()


def demo_session(models: dict[str, StackModel] | None = None) -> Session:
    """A Session over the synthetic engine, clocked by the engine's steps."""

    engine = SyntheticEngine(models)
    # resources once a simulated second, as a live race samples them
    core = RaceCore(engine, DemoSource(engine), clock=engine.clock, sample_every=1.0)
    return Session(core)


def synthetic_parts(
    models: dict[str, StackModel] | None = None, cores: Sequence[int] = (0, 1)
) -> tuple[RaceParts, SyntheticEngine]:
    """A bench's engine, stacks and clock, all synthetic: `run_bench(plan, parts=...)`
    races the models level by level in milliseconds, through the same level protocol as
    a real bench (its request timeout is the engine settings', as a real engine's)."""
    engine = SyntheticEngine(models)

    def make(settings: EngineSettings) -> LoadEngine:
        engine.timeout = settings.timeout
        return engine

    parts = RaceParts(
        engine=make,
        source=DemoSource(engine),
        cores=list(cores),
        note="synthetic engine: models, no servers",
        clock=engine.clock,
    )
    return parts, engine
