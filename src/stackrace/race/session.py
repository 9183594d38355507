"""The app's race: the race core driven by the user, with no UI in it.

    session = Session(core)
    await session.start(RacePlan(stacks=("uvicorn", "gunicorn-sync")))
    view = await session.poll()            # call ~4x/s: readiness, targets, levels, ramp
    await session.set_concurrency(200)     # every running stack at once, live
    session.start_ramp()                   # step up through the levels, mark verdicts
    await session.stop()                   # stop the load and every stack

`poll()` returns a `SessionView`: one `PaneView` per stack or URL target with the
engine's latest figures, its state, resources, the verdict at the current level and the
first breaking point. All decisions live here, in the race core or in `stackrace.ramp`;
the UI only draws views and forwards commands.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from stackrace.engine.model import TargetSnapshot
from stackrace.race import accounting
from stackrace.race.core import RaceCore, StackState
from stackrace.race.placement import Placement, place
from stackrace.race.urls import UrlHandle, UrlTarget
from stackrace.race_settings import RaceSettings
from stackrace.ramp import LevelLog, Ramp, StepResult, Verdict, peak
from stackrace.stacks.sampler import ResourceSample


@dataclass(frozen=True)
class RacePlan:
    """What the user chose: stacks, URL targets, the race settings and the first level."""

    stacks: tuple[str, ...] = ()
    urls: tuple[UrlTarget, ...] = ()
    settings: RaceSettings = field(default_factory=RaceSettings)
    concurrency: int = 10
    rate: float | None = None  # req/s per stack; None = closed loop

    @property
    def workload(self) -> str:
        return self.settings.workload


@dataclass
class PaneView:
    """Everything one pane shows for one tick."""

    id: str
    name: str
    family: str
    state: StackState
    target: TargetSnapshot | None = None
    resources: ResourceSample | None = None
    baseline: ResourceSample | None = None  # before load
    breaking: Verdict | None = None  # the first level that broke it (the ramp's mark)
    verdict: Verdict | None = None  # the current level's verdict (clears when it recovers)
    log_tail: list[str] = field(default_factory=list)
    external: bool = False
    refused: str | None = None  # the engine would not load it
    cpus: list[int] | None = None  # its pinned cores
    cpu_us_per_request: float | None = None
    engine_share: float = 0.0  # the engine's lag / mean latency, this level
    engine_limited: bool = False
    engine_limit: str = ""  # why and by how much
    little: accounting.LittleCheck | None = None


@dataclass
class SessionView:
    seq: int
    panes: list[PaneView]
    concurrency: int
    rate: float | None
    engine_cpu: float = 0.0
    saturated: bool = False
    ramp: str | None = None  # "ramp 3/11 → 20" while a ramp runs
    ramp_done: bool = False  # a ramp has just ended: show its summary
    errors: list[str] = field(default_factory=list)
    placement: str = ""  # where stacks and engines run ("4 stacks share 1 core …")
    shared_cores: bool = False
    timeout: float = 10.0
    keepalive: bool = True
    # "" while the database is fine or unused; else what happened to it (the figures
    # are then the database's, not the stacks', and no verdict is drawn)
    database: str = ""


@dataclass(frozen=True)
class SummaryRow:
    id: str
    name: str
    peak: StepResult | None
    breaking: Verdict | None
    mem_before: ResourceSample | None
    mem_after: ResourceSample | None
    mem_peak: int  # highest RSS seen, bytes
    steps: tuple[StepResult, ...] = ()


class Session:
    """Starts stacks, loads them when ready, tracks levels, runs ramps."""

    def __init__(self, core: RaceCore) -> None:
        self.core = core
        self.plan = RacePlan()
        self.levels = LevelLog(cpu_of=self._cpu_of)
        self.ramp: Ramp | None = None
        self.ramp_finished = False
        # what the last ramp found, per member: kept when the load is explored afterwards
        self.ramp_steps: dict[str, list[StepResult]] = {}
        self.ramp_breaking: dict[str, Verdict | None] = {}
        self._last_seq = -1

    @property
    def engine(self):  # type: ignore[no-untyped-def]
        return self.core.engine

    @property
    def concurrency(self) -> int:
        return self.core.concurrency

    @property
    def rate(self) -> float | None:
        return self.core.rate

    @property
    def errors(self) -> list[str]:
        return self.core.errors

    # --- lifecycle ------------------------------------------------------------------

    async def start(self, plan: RacePlan, placement: Placement | None = None) -> None:
        """Start the engine and every chosen stack; URL targets are loaded at once."""
        import os

        self.plan = plan
        self.core.settings = plan.settings
        self.core.concurrency = plan.concurrency
        self.core.rate = plan.rate
        if placement is None:
            cores = sorted(os.sched_getaffinity(0))
            placement = place("parallel", len(plan.stacks), None, cores)
        urls = [UrlHandle(u, i + 1) for i, u in enumerate(plan.urls)]
        await self.core.start(plan.stacks, urls, placement)
        await self.poll()

    async def stop(self) -> None:
        self.ramp = None
        await self.core.stop()

    # --- commands -------------------------------------------------------------------

    async def set_concurrency(self, n: int) -> None:
        """Connections per stack (closed loop), or req/s per stack in rate mode."""
        if self.rate is not None:
            await self.set_rate(float(n))
            return
        await self.core.set_concurrency(n)
        self._new_level()

    async def set_rate(self, rate: float | None) -> None:
        """Constant rate per stack in req/s, or None for closed loop."""
        switching = (rate is None) != (self.rate is None)
        await self.core.set_rate(rate)
        if switching:
            # closed-loop levels and rates are different scales: never judge one by the other
            self.levels.clear()
        self._new_level()

    def _new_level(self) -> None:
        # The running totals become the new level's figures; the first half second is
        # left out so connections opening (or retiring) do not blur the level.
        self.core.reset_totals(warmup=0.5)

    def start_ramp(self, top: int = 2000, dwell: float = 3.0) -> None:
        """Step the load from 1 up to `top` from a clean state, then go back."""
        self.levels.clear()
        self.ramp_finished = False
        self.ramp = Ramp.from_level(1, top=top, dwell=dwell, restore=self.level)

    def stop_ramp(self) -> None:
        self.ramp = None

    @property
    def level(self) -> int:
        return round(self.rate) if self.rate is not None else self.concurrency

    # --- polling --------------------------------------------------------------------

    async def poll(self) -> SessionView:
        """Advance everything one tick and return what to show. Call it ~4x/s."""
        await self.core.poll()
        snap = self.core.engine.latest
        if snap is not None and snap.seq != self._last_seq:
            self._last_seq = snap.seq
            self.levels.feed(snap)
        await self._advance_ramp()
        return self.view()

    def _cpu_of(self, member_id: str) -> tuple[float | None, float | None]:
        m = self.core.members.get(member_id)
        if m is None or m.resources is None:
            return None, None
        return m.resources.cpu_percent, self.core.capacity(member_id)

    async def _advance_ramp(self) -> None:
        if self.ramp is None:
            return
        ids = self.core.attached()
        all_broken = bool(ids) and all(self.levels.breaking_point(i) for i in ids)
        done_before = self.ramp.done
        if not done_before and self._ramp_ends(all_broken):
            # the ramp's findings, before the restored level adds to the log
            for i in self.core.members:
                self.ramp_steps[i] = self.levels.results(i)
                self.ramp_breaking[i] = self.levels.breaking_point(i)
        level = self.ramp.advance(self.core.clock(), all_broken)
        if level is not None:
            await self.set_concurrency(level)
        if self.ramp.done:
            self.ramp = None
            self.ramp_finished = True

    def _ramp_ends(self, all_broken: bool) -> bool:
        r = self.ramp
        if r is None or r.started_at is None:
            return False
        due = int((self.core.clock() - r.started_at) // r.dwell)
        return due > r.index and (due >= len(r.levels) or all_broken)

    def view(self) -> SessionView:
        snap = self.core.engine.latest
        panes = []
        rate_mode = self.rate is not None
        for mid, m in self.core.members.items():
            target = self.core.target(mid)
            state = m.handle.state
            little = None
            share = 0.0
            limit = ""
            cpu_us = None
            if target is not None:
                share = accounting.engine_share(target.total)
                limit = accounting.engine_limit(target.total, target.saturated)
                if not rate_mode:
                    little = accounting.little_check(target.total, target.concurrency)
                cpu_us = self.core.cpu_per_request_us(mid, target.total.requests)
            panes.append(
                PaneView(
                    id=mid,
                    name=m.handle.name,
                    family=m.handle.family,
                    state=state,
                    target=target,
                    resources=m.resources,
                    baseline=m.baseline,
                    breaking=self.levels.breaking_point(mid),
                    verdict=self.levels.verdict_now(mid),
                    log_tail=m.handle.log_tail(12)
                    if state == StackState.CRASHED or m.refused
                    else [],
                    external=m.handle.external,
                    refused=m.refused,
                    cpus=m.stack_cpus,
                    cpu_us_per_request=cpu_us,
                    engine_share=share,
                    engine_limited=bool(limit),
                    engine_limit=limit,
                    little=little,
                )
            )
        ramp = None
        if self.ramp is not None and self.ramp.level is not None:
            ramp = f"ramp {self.ramp.progress()} → {self.ramp.level}"
        placement = self.core.placement
        database = ""
        state_of = getattr(self.core.source, "database_state", None)
        if state_of is not None:
            database = state_of()
            if database:
                for pane in panes:
                    pane.verdict = None
        return SessionView(
            seq=snap.seq if snap is not None else 0,
            panes=panes,
            concurrency=self.concurrency,
            rate=self.rate,
            engine_cpu=snap.engine_cpu if snap is not None else 0.0,
            saturated=snap.saturated if snap is not None else False,
            ramp=ramp,
            ramp_done=self.ramp_finished,
            errors=[*self.core.errors, *self.core.engine.errors],
            placement=placement.note if placement else "",
            shared_cores=placement.shared if placement else False,
            timeout=self.core.settings.timeout,
            keepalive=self.core.settings.keepalive,
            database=database,
        )

    # --- on demand ------------------------------------------------------------------

    def percentile_curve(self, pane_id: str, points: Sequence[float]) -> list[tuple[float, int]]:
        """Latency at each percentile, at the current level (empty before any data)."""
        if pane_id not in self.core.attached():
            return []
        pts = list(points)
        try:
            values = self.core.engine.total_percentiles(pane_id, pts)
        except KeyError:
            return []
        return list(zip(pts, values, strict=True)) if any(values) else []

    def log_text(self, pane_id: str, lines: int = 200) -> str:
        m = self.core.members.get(pane_id)
        if m is None:
            return ""
        text = "\n".join(m.handle.log_tail(lines))
        return f"engine refused it: {m.refused}\n{text}" if m.refused else text

    def summary(self) -> list[SummaryRow]:
        rows = []
        for mid, m in self.core.members.items():
            steps = self.levels.results(mid)
            rows.append(
                SummaryRow(
                    id=mid,
                    name=m.handle.name,
                    peak=peak(steps),
                    breaking=self.levels.breaking_point(mid),
                    mem_before=m.baseline,
                    mem_after=m.resources,
                    mem_peak=m.mem_peak,
                    steps=tuple(steps),
                )
            )
        return rows
