"""`stackrace tune` on real servers: race/bench/tune_search.py's decisions carried out on the
race core, one configuration loaded at a time.

    state = TuneState(search)
    await run_tune(plan, state, progress)        # state holds every probe as it ends
    result = tune_result(plan, state, interrupted=None)   # race/bench/tune_result.py

- **Where**: every configuration runs on the servers' cores and the engine on its own
  (race/core/placement.py, `rotate`: on a 2-core machine the server gets cpu 0 of the two,
  the engine cpu 1); with `--cluster` the engines run on load hosts and a configuration
  gets the whole app host. The result says which, and what it means for a deploy.
- **Interleaving without restarts**: a configuration is started when the search first
  asks for it and kept running (idle: no connection) while the search may come back to
  it, so the rounds measure A B C A B C … without a start-up between them; at most
  `MAX_RUNNING` are up at once (the least recently measured is stopped; it is started
  again if asked for).
- **Each probe** is race/bench/protocol.py's `LevelRunner.probe` on the one configuration asked
  (the others idle): warmed, measured until its percentile has its answers (run longer
  if need be, race/bench/capacity_driver.py), judged against the SLO with complete accounting;
  the machine's noise around it is read (race/core/noise.py).
- **Nothing finished is lost**: each probe, each configuration started and each one
  that could not be measured is journalled as it ends (race/core/journal.py), with the
  elapsed time the search asked at; `state` holds them too, so an interrupted tune
  writes what it measured. A journal read back is recorded into a fresh search before
  the first new probe (`resume`): the search is deterministic, so it goes on exactly
  where it stopped, and the budget counts the time already spent.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from stackrace.engine.client import Engine
from stackrace.engine.model import EngineSettings
from stackrace.race.bench.protocol import BenchPlan, LevelRunner
from stackrace.race.bench.results import server_version
from stackrace.race.bench.tune_search import Ask, TuneSearch
from stackrace.race.core.capacity_plan import (
    LONGEST_PROBE_S,
    MIN_PROBE_S,
    ResumeError,
    unsteady_of,
)
from stackrace.race.core.capacity_plan import probe_of as _probe_of
from stackrace.race.core.capacity_search import Probe, needed_answers
from stackrace.race.core.core import RaceCore
from stackrace.race.core.journal import Entry, Journal, JournalDone, JournalProbe, JournalStack
from stackrace.race.core.members import LoadEngine, RaceParts, StackStarter
from stackrace.race.core.noise import NoiseMeter
from stackrace.race.core.placement import CorePlacement, place
from stackrace.race.core.stack_source import StacksFileSource
from stackrace.race.core.state import StackState
from stackrace.race.core.urls import UrlHandle, UrlTarget
from stackrace.report.schema import CapacityProbe, Level, ProbeNoise
from stackrace.report.slo import Slo
from stackrace.report.why import cause_line
from stackrace.stacks.definition import Stack

# configurations up at once (idle ones hold memory, not CPU; one stopped and asked for
# again costs a start-up and a cold first probe)
MAX_RUNNING = 8
READY_TIMEOUT_S = 60.0


@dataclass
class TuneJob:
    """What the driver needs besides the search: the settings (a BenchPlan's), how to
    make a configuration's stack from its name, the servers started by hand."""

    bench: BenchPlan
    resolve: Callable[[str], Stack]
    urls: dict[str, UrlTarget] = field(default_factory=dict)  # label → a --url server
    journal: Journal | None = None
    resume: list[Entry] = field(default_factory=list)


@dataclass
class Measured:
    """One configuration's evidence: every probe with its level, in order."""

    name: str
    title: str = ""
    family: str = ""
    version: str = ""
    cpus: list[int] | None = None
    probes: list[CapacityProbe] = field(default_factory=list)
    error: str = ""


@dataclass
class TuneState:
    """The tune so far, complete after every probe (what an interrupted tune writes)."""

    search: TuneSearch
    measured: dict[str, Measured] = field(default_factory=dict)
    before: float | None = None  # other processes' CPU before the first server started
    placement: CorePlacement | None = None
    started: float = field(default_factory=time.monotonic)  # less the time resumed


def placement_for(settings_cpus: int | None, parts: RaceParts | None) -> CorePlacement:

    if parts is None:
        return place("rotate", 1, settings_cpus, sorted(os.sched_getaffinity(0)))
    return place("rotate", 1, settings_cpus, list(parts.cores), engine_here=False)


class _Driver:
    def __init__(
        self,
        plan: TuneJob,
        state: TuneState,
        progress: Callable[[str], None],
        source: StackStarter,
    ) -> None:
        self.plan = plan
        self.source = source
        self.state = state
        self.progress = progress
        self.s = plan.bench.settings
        self.slo = Slo.parse(plan.bench.settings.slo or "")
        self.needed = needed_answers(self.slo.quantile)
        self.noise = plan.bench.noise
        self.used: dict[str, float] = {}  # running configuration → last measured

    def elapsed(self) -> float:
        return time.monotonic() - self.state.started

    # --- replaying a journal ------------------------------------------------------------

    def replay(self) -> None:
        search = self.state.search
        for e in self.plan.resume:
            if isinstance(e, JournalStack):
                m = self._measured(e.stack)
                m.title, m.family, m.version, m.cpus = e.title, e.family, e.version, e.cpus
                continue
            if not isinstance(e, JournalProbe | JournalDone):
                continue
            ask = search.next(e.t)
            if (
                ask is None
                or ask.name != e.stack
                or (isinstance(e, JournalProbe) and abs(ask.load - e.probe.load) > 1e-9)
            ):
                wanted = "nothing more" if ask is None else f"{ask.name} at {ask.load:g}"
                raise ResumeError(
                    f"the journal has {e.stack} where this tune asks for {wanted} (made by "
                    "another version of stackrace, or other settings)"
                )
            if isinstance(e, JournalDone):
                search.record(ask, None, e.error or "")
                self._measured(e.stack).error = e.error or ""
                continue
            search.record(ask, _probe_of(e.probe))
            self._measured(e.stack).probes.append(e.probe)
            if e.probe.level.why is not None:  # as the run steered, the replay does
                search.steer(e.probe.level.why.cause.kind.value)
        if self.plan.resume:
            last = max((e.t for e in self.plan.resume), default=0.0)
            self.state.started = time.monotonic() - last

    def _measured(self, name: str) -> Measured:
        return self.state.measured.setdefault(name, Measured(name))

    # --- the loop ----------------------------------------------------------------------

    async def run(self, core: RaceCore, runner: LevelRunner, cpus: list[int] | None) -> None:
        search = self.state.search
        while True:
            t_ask = round(self.elapsed(), 3)
            ask = search.next(t_ask)
            if ask is None:
                return
            problem = await self._ensure(core, ask.name, cpus, t_ask)
            if problem:
                search.record(ask, None, problem)
                self._measured(ask.name).error = problem
                self._log(JournalDone(stack=ask.name, error=problem, t=t_ask))
                self.progress(f"  ✗ {ask.name}: {problem}")
                continue
            await self._idle_others(core, ask.name)
            probe, cp = await self._probe(runner, ask)
            if probe is None or cp is None:
                why = f"stopped during its probe at {_at(ask.load, self.s.rate)}"
                search.record(ask, None, why)
                self._measured(ask.name).error = why
                self._log(JournalDone(stack=ask.name, error=why, t=t_ask))
                continue
            search.record(ask, probe)
            if cp.level.why is not None:  # the cause seen orders what is measured next
                said = search.steer(cp.level.why.cause.kind.value)
                self.progress(f"  {ask.name}: why: {cause_line(cp.level.why)}")
                if said:
                    self.progress(f"  {said}")
            if ask.phase != "round":
                cand = search.cands[ask.name]
                assert cand.search is not None
                cp.phase = cand.search.probes[-1].phase
            self._measured(ask.name).probes.append(cp)
            self._log(JournalProbe(stack=ask.name, probe=cp, t=t_ask))
            self.used[ask.name] = time.monotonic()
            self._tell(ask, cp)

    def _log(self, entry: JournalStack | JournalProbe | JournalDone) -> None:
        if self.plan.journal is not None:
            self.plan.journal.write(entry)

    def _tell(self, ask: Ask, cp: CapacityProbe) -> None:
        lv = cp.level
        mark = "meets" if cp.meets else f"misses: {cp.why}"
        short = "" if cp.enough else f" (only {lv.requests:,} answers of {self.needed:,})"
        where = f"round {ask.round}" if ask.phase == "round" else cp.phase
        self.progress(
            f"  [{self.elapsed():4.0f}s] {ask.name:<40} {where:<8} "
            f"{_at(ask.load, self.s.rate):>10} {lv.rps:>9,.0f} req/s  {mark}{short}"
        )

    async def _ensure(self, core: RaceCore, name: str, cpus: list[int] | None, t: float) -> str:
        """The configuration up, ready and attached: "" or why not."""
        m = core.members.get(name)
        if m is not None and m.handle.state not in (StackState.CRASHED, StackState.STOPPED):
            await core.attach(name)
            return "" if core.members[name].attached else (m.refused or "not loadable")
        if m is not None:  # it died since it was last measured
            return f"exited: {m.handle.error or m.handle.state}"
        while len(self.used) >= MAX_RUNNING:
            oldest = min(self.used, key=lambda k: self.used[k])
            del self.used[oldest]
            await core.stop_member(oldest)
            core.members.pop(oldest, None)
        record = self._measured(name)
        if name in self.plan.urls:
            core.add_member(UrlHandle(self.plan.urls[name], 0, id=name))
            record.title, record.family = self.plan.urls[name].url, "external"
        else:
            stack = self.plan.resolve(name)
            record.title, record.family, record.cpus = stack.title, stack.spec.family, cpus
            record.version = await asyncio.to_thread(server_version, stack)
            core.add_member(self.source.start_stack(stack, cpus), cpus)
            self.progress(f"  {name}: starting")
        self._log(
            JournalStack(
                stack=name, title=record.title, family=record.family,
                version=record.version, cpus=record.cpus, t=t,
            )
        )  # fmt: skip
        end = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < end:
            await core.poll()
            state = core.members[name].handle.state
            if state in (StackState.READY, StackState.WARMING):
                if await core.attach(name):
                    self.used[name] = time.monotonic()
                    return ""
                return core.members[name].refused or "refused by the engine"
            if state in (StackState.CRASHED, StackState.STOPPED):
                error = core.members[name].handle.error
                return (error or f"{state} before it was ready").split("\n")[0]
            await asyncio.sleep(0.05)
        await core.stop_member(name)
        return f"not ready within {READY_TIMEOUT_S:g}s"

    async def _idle_others(self, core: RaceCore, name: str) -> None:
        others = [i for i in core.attached() if i != name]
        if not others:
            return
        if self.s.rate is None:
            await core.set_concurrency(0, others)
        else:
            for i in others:
                await core.detach(i)

    async def _probe(
        self, runner: LevelRunner, ask: Ask
    ) -> tuple[Probe | None, CapacityProbe | None]:
        core = runner.core

        def undecided(i: str) -> bool:
            t = core.target(i)
            return t is not None and self.slo.judge_window(t.total).meets

        mark = self.noise.mark(core.engine.engine_pids(ask.name)) if self.noise else None
        t0 = time.monotonic()
        got = await runner.probe(
            {ask.name: ask.load},
            self.needed,
            min(MIN_PROBE_S, self.s.duration),
            self.s.duration,
            LONGEST_PROBE_S,
            undecided,
        )
        seconds = time.monotonic() - t0
        felt: ProbeNoise | None = self.noise.since(mark) if self.noise and mark else None
        lv: Level | None = got.get(ask.name)
        if lv is None:
            return None, None
        judged = self.slo.judge_level(lv)
        m = core.members.get(ask.name)
        first_miss = not judged.meets and core.evidence.latest(ask.name) is None
        # its first miss: why, from an evidence window with the probe's load still on
        if first_miss and m is not None and core.evidence.want(m, round(ask.load)):
            await core.evidence.settle(timeout=core.evidence.seconds + 20)
            lv.why = core.evidence.at(ask.name, round(ask.load))
        cp = CapacityProbe(
            load=ask.load,
            meets=judged.meets,
            why=judged.why,
            phase=ask.phase,
            answers=lv.requests,
            enough=lv.requests >= self.needed,
            seconds=round(seconds, 3),
            figures=judged.figures(),
            level=lv,
            noise=felt,
            slices=(slices := runner.last_slices.get(ask.name, [])),
            unsteady=unsteady_of(slices, self.slo),
        )
        # the search's probe is made from the record the journal keeps, as a resume
        # makes it: the same figures, the same busy flag, the same decisions
        probe = _probe_of(cp)
        return probe, cp


def _at(load: float, rate: float | None) -> str:
    return f"c={load:g}" if rate is None else f"{load:,.0f} req/s"


async def run_tune(
    plan: TuneJob,
    state: TuneState,
    progress: Callable[[str], None] = lambda s: None,
    parts: RaceParts | None = None,
) -> None:
    """Run the search to its end (or until cancelled: `state` keeps every probe)."""
    s = plan.bench.settings
    placement = placement_for(s.cpus, parts)
    state.placement = placement
    progress(f"placement: {placement.note}")
    engine_settings = EngineSettings(timeout=s.timeout, interval=0.25)
    source: StackStarter
    if parts is None:
        engine: LoadEngine = Engine(
            engine_settings, per_target=True, allow_remote=plan.bench.allow_remote
        )
        source = StacksFileSource(
            stacks_file=plan.bench.stacks_file, defs={}, memory_max=s.memory_max
        )
    else:
        engine = parts.engine(engine_settings)
        source = parts.source
    source.use_database(plan.bench.db_env)
    driver = _Driver(plan, state, progress, source)
    driver.replay()
    core = RaceCore(engine, source, s, interval=engine_settings.interval)
    core.hold_attach = True  # the driver attaches the one configuration it measures
    core.concurrency = 0
    runner = LevelRunner(core, plan.bench, progress)
    await core.start([], placement=placement)
    watch = plan.bench.database
    if watch is not None:
        await watch.start()
    try:
        if plan.bench.noise is not None and state.before is None:
            state.before = await plan.bench.noise.quiet_cores(1.0)
        if not plan.resume:
            state.started = time.monotonic()
        await driver.run(core, runner, placement.stack_cpus[0] if placement.stack_cpus else None)
    finally:
        await core.stop()
        if watch is not None:
            await watch.stop()


def noise_meter(parts: RaceParts | None) -> NoiseMeter | None:
    """The noise of this machine: none to read when the servers run elsewhere."""
    return NoiseMeter() if parts is None else None
