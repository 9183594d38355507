"""`stackrace load`'s run: one server, the race core's one member, for a time or N requests.

    core = RaceCore(engine, None, settings, requests=kinds, concurrency=50)
    run = await drive(core, LoadMember(base, name), LoadPlan(duration=10.0), stop, seen)
    run.target.total                 # the measured window: sent = answered + failed + waiting

The race core's third driver, beside bench's levels (race/bench) and the app's session
(race/live): the member, its engine target and everything counted about it are the
core's, so `load`, bench and the app count and judge a server the same way. What this
driver adds is what `load` promises, and only that:

- **the member**: a server stackrace did not start (race/core/urls.py `UrlHandle`),
  attached by the core once it polls; the requests, connections, rate, TLS, slow
  clients and budget of its target are the core's (`RaceCore.spec`);
- **the warm-up** (`--warmup`): the load runs that long, then the totals restart on an
  interval boundary (`RaceCore.reset_totals`, as bench's levels): the requests in
  flight then are carried into the measured window (engine/aggregate.py), and what
  the warm-up sent, got back and lost is kept for the summary (`WarmupCount`);
- **the measured part**: `duration`, or `requests` (`-n N`, as ab and hey): with no
  warm-up the budget goes out with the target (TargetSpec.budget), so not one request
  more is sent; after a warm-up the load is drained first, as bench's `--requests`
  (race/core/budget.py, shared with it). The wait ends when every one of the N ended,
  answered or failed; a duration given as well is then a limit;
- **a stop** (`stop` set: Ctrl-C, SIGTERM, SIGHUP) ends either part early, the figures
  so far kept and said to be so;
- **every interval** (`seen`): the engine's CPU and whether it was saturated, and the
  fastest answer so far (the service time's estimate the judgment weighs:
  rules/level.py), handed on to a progress line.

Time and waits are the core's clock (race/core/clock.py), so the driver runs on the
synthetic engine in a unit test as on the real one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from stackrace.engine.model import EngineSnapshot, TargetSnapshot, WindowStats
from stackrace.race.core import budget
from stackrace.race.core.core import RaceCore
from stackrace.race.core.urls import UrlHandle, UrlTarget

# how often the driver looks at the engine's figures and at a stop: a Ctrl-C is seen
# within this, and no interval (0.25 s) goes unread
LOOK_EVERY = 0.05


@dataclass(frozen=True)
class LoadPlan:
    """How long a load lasts: `duration` seconds measured, or `requests` (then
    `duration`, when given, is a limit), after `warmup` seconds not counted."""

    duration: float | None = 10.0
    warmup: float = 0.0
    requests: int | None = None  # -n: exactly this many (closed loop)
    timeout: float = 10.0  # the request timeout: a budget's wait never outlasts it idle


@dataclass(frozen=True)
class Phase:
    """Where a load is, for a progress line."""

    warming: bool
    elapsed: float  # seconds into this part
    planned: float | None  # its seconds (None: until N requests ended)
    requests: int | None = None  # -n: of how many


@dataclass(frozen=True)
class WarmupCount:
    """What the warm-up sent, got back and lost: in no figure of the measured window."""

    sent: int
    answered: int
    lost: int

    @classmethod
    def of(cls, w: WindowStats) -> WarmupCount:
        return cls(sent=w.sent, answered=w.requests, lost=w.lost)

    @property
    def waiting(self) -> int:
        return max(0, self.sent - self.answered - self.lost)

    def describe(self, carried: bool = False) -> str:
        """`carried`: the warm-up ended and the load went on, so the requests still in
        flight then were carried into the measured time (and are counted there)."""
        where = "in flight when the measured time began" if carried else "still waiting"
        return (
            f"{self.sent:,} requests sent, {self.answered:,} answered, "
            f"{self.lost:,} failed without an answer, {self.waiting:,} {where}"
        )


@dataclass
class LoadRun:
    """What one load measured: the member's target as the engine last reported it
    (its totals: the measured window), and what the driver saw on the way."""

    target_id: str
    target: TargetSnapshot | None = None  # None: never loaded (`refused` says why)
    snapshot: EngineSnapshot | None = None  # the engine's last
    refused: str = ""  # the engine would not load the member: why
    warmup: WarmupCount | None = None  # None: no warm-up
    stopped: bool = False  # ended early by the user (a signal)
    in_warmup: bool = False  # ... before the warm-up was over: nothing was counted
    stalled: bool = False  # -n: nothing ended for longer than the timeout
    measured_from: float = 0.0  # wall clock (time.time) when the counting began
    engine_cpu: list[float] = field(default_factory=list)  # each measured interval's, %
    saturated: int = 0  # measured intervals the engine was saturated in
    fastest_us: int | None = None  # the fastest answer, warm-up included
    errors: list[str] = field(default_factory=list)

    @property
    def mostly_saturated(self) -> bool:
        """Saturated in half the measured intervals or more: the engine's limit."""
        return bool(self.engine_cpu) and 2 * self.saturated >= len(self.engine_cpu)


def member(base: str, name: str) -> UrlHandle:
    """The loaded server as the core's member: `base` its URL (http://host:port), `name`
    the target's id (the URL given: its label in --metrics)."""
    return UrlHandle(UrlTarget(base, name=name), 0, id=name)


Seen = Callable[[EngineSnapshot, Phase], None]


class _LoadDriver:
    def __init__(
        self, core: RaceCore, handle: UrlHandle, plan: LoadPlan, stop: asyncio.Event, seen: Seen
    ) -> None:
        self.core = core
        self.id = handle.id
        self.handle = handle
        self.plan = plan
        self.stop = stop
        self.seen = seen
        self.run = LoadRun(handle.id)
        self._seq = -1
        self._phase = Phase(warming=plan.warmup > 0, elapsed=0.0, planned=plan.warmup)
        self._began = 0.0  # the current part's start, on the core's clock

    def _look(self) -> None:
        """Read the engine's latest interval once: its CPU, its fastest answer, and the
        progress line."""
        snap = self.core.engine.latest
        if snap is None or snap.seq == self._seq:
            return
        self._seq = snap.seq
        t = snap.target(self.id)
        if t is None:
            return
        lat = t.interval.latency
        if lat.count and (self.run.fastest_us is None or lat.min < self.run.fastest_us):
            self.run.fastest_us = lat.min
        p = self._phase
        if not p.warming:
            self.run.engine_cpu.append(snap.engine_cpu)
            self.run.saturated += snap.saturated
        elapsed = self.core.clock() - self._began
        self.seen(snap, Phase(p.warming, elapsed, p.planned, p.requests))

    async def _wait(self) -> None:
        """One look's wait: the engine reports meanwhile, the core polls its member."""
        await self.core.clock.sleep(LOOK_EVERY)
        await self.core.poll()
        self._look()

    async def _for(self, seconds: float) -> bool:
        """Load for `seconds`; False when stopped before."""
        end = self.core.clock() + seconds
        while self.core.clock() < end:
            if self.stop.is_set():
                return False
            await self._wait()
        return not self.stop.is_set()

    def _part(self, warming: bool, planned: float | None) -> None:
        self._began = self.core.clock()
        self._phase = Phase(warming, 0.0, planned, self.plan.requests)

    async def drive(self) -> LoadRun:
        core, plan, run = self.core, self.plan, self.run
        if plan.requests and plan.warmup <= 0:
            core.budget = plan.requests  # with the target: not one more goes out
        await core.start((), urls=[self.handle])
        await core.poll()  # a URL is ready at once: attached now, or refused
        m = core.members[self.id]
        if not m.attached:
            run.refused = m.refused or "the engine did not load it"
            return await self._end()
        run.measured_from = time.time()
        self._part(warming=plan.warmup > 0, planned=plan.warmup)
        if plan.warmup > 0:
            if not await self._for(plan.warmup):
                run.stopped = run.in_warmup = True
                return await self._end()
            ids = [self.id]
            if plan.requests:
                await budget.drain(core, ids, plan.timeout, self._next)
            await self._next()  # the totals restart on an interval boundary
            t = core.target(self.id)
            run.warmup = WarmupCount.of(t.total) if t is not None else WarmupCount(0, 0, 0)
            core.reset_totals(0.0, ids)
            run.measured_from = time.time()
            if plan.requests:
                await core.set_budget(plan.requests, ids)
        self._part(warming=False, planned=plan.duration)
        if plan.requests:
            limit = plan.duration
            began = core.clock()

            def over() -> bool:
                late = limit is not None and core.clock() - began >= limit
                return self.stop.is_set() or late

            ended = await budget.spent(
                core, [self.id], plan.requests, plan.timeout, wait=self._wait, stop=over
            )
            run.stalled = not ended
            run.stopped = self.stop.is_set()
        else:
            assert plan.duration is not None  # a time, or a number of requests
            run.stopped = not await self._for(plan.duration)
        return await self._end()

    async def _next(self) -> None:
        await self.core.next_interval()
        self._look()

    async def _end(self) -> LoadRun:
        """Stop the engine (its last counts come in) and keep the member's figures."""
        core, run = self.core, self.run
        await core.stop()
        snap = core.engine.latest
        run.snapshot = snap
        if snap is not None and self.id in core.attached():
            run.target = snap.target(self.id)
        if run.in_warmup and run.target is not None:
            run.warmup = WarmupCount.of(run.target.total)
        run.errors = list(core.engine.errors)
        return run


async def drive(
    core: RaceCore,
    handle: UrlHandle,
    plan: LoadPlan,
    stop: asyncio.Event,
    seen: Seen = lambda snap, phase: None,
) -> LoadRun:
    """Load the one member `handle` through `core` as `plan` says, until done or `stop`
    is set; the engine is stopped before this returns."""
    return await _LoadDriver(core, handle, plan, stop, seen).drive()
