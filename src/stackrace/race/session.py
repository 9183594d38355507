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
from typing import Protocol

from stackrace.engine.model import TargetSnapshot
from stackrace.race import accounting, explain, verdicts, wedge
from stackrace.race.capacity_live import LiveCapacity
from stackrace.race.capacity_run import CapacityPlan
from stackrace.race.cleanstart import CleanStart
from stackrace.race.core import RaceCore, StackState
from stackrace.race.ghost import Ghost, GhostView
from stackrace.race.placement import Placement, place
from stackrace.race.slo_flag import slo_flag
from stackrace.race.talk import TalkPlayer, TalkStep
from stackrace.race.thennow import ThenNow, judge_live
from stackrace.race.urls import UrlHandle, UrlTarget
from stackrace.race.verdicts import SharedCore, VerdictHold
from stackrace.race.warmup import WarmupTracker
from stackrace.race.wedge import Wedge, WedgeWatch
from stackrace.race_settings import RaceSettings
from stackrace.ramp import CpuShare, LevelLog, Ramp, StepResult, Verdict, peak
from stackrace.report.schema import CapacityResult, Then
from stackrace.report.slo import Slo
from stackrace.stacks.sampler import ResourceSample

RAMP_TOP = 2000  # `r` ramps from 1 to here
RAMP_DWELL = 3.0  # seconds a level


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
    proof: str = ""  # the figure that proves the verdict, at its level
    annotation: str = ""  # one plain-language sentence, when it matters
    behind: str = ""  # rate mode: how far behind schedule ("" when it keeps up)
    warm_climb: float | None = None  # while warming: req/s rise since its first second
    url: str = ""  # what the engine loads
    loads: str = ""  # your requests, when they are what is loaded ("GET / ×3, /slow ×1")
    synthetic: bool = False  # a model's figures (--demo), not a measurement
    judged: bool = False  # the level running now was measured long enough to judge
    # a lower level was measured too (or this is c=1): the breaking rule compares levels,
    # so a queue or a CPU limit shows only against one; without it, "not broken" would
    # claim more than was tested
    compared: bool = False
    verdict_since: float | None = None  # race seconds: when the verdict's kind began
    wedged: bool = False  # it answers nothing while clients wait (race/wedge.py)
    # it shares a full core and only waited for it: its share and wait, instead of a
    # verdict of its own ("its share 28 % of the full core, waited 70 %")
    core_share: str = ""
    # with --slo: whether the level running now meets it (None: too few answers yet),
    # and the line that says so with its figures (race/slo_flag.py)
    slo_meets: bool | None = None
    slo_text: str = ""
    capacity_load: float | None = None  # `k`: the load of its capacity probe running now


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
    synthetic: bool = False  # --demo: nothing here was measured
    caption: str = ""  # a talk track's line for this moment
    replay: str = ""  # a replay's position ("replay 0:42 / 3:10 ×2")
    ghosts: list[GhostView] = field(default_factory=list)  # one per stack of each ghost
    ramp_top: int = 0  # the top level of the ramp running (or last run)
    # "" while the database is fine or unused; else what happened to it (the figures
    # are then the database's, not the stacks', and no verdict is drawn)
    database: str = ""
    shared: SharedCore | None = None  # the cores the stacks share (None: each its own)
    clock: float = 0.0  # race seconds now (what a verdict's `since` is counted in)
    slo: str = ""  # the objective as shown ("p99 < 50 ms"), "" without --slo
    slo_target_us: float | None = None  # its latency target: the line on the chart
    slo_quantile: float | None = None  # its percentile (0.99), None for a mean
    capacity: str | None = None  # `k`: the search's progress while it runs
    capacity_done: bool = False  # a capacity search has just ended: show its ranking


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
    why: str = ""  # the proof of the breaking verdict, in figures


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
        self.ramp_top = 0
        self.ramp_end = ""  # why the last ramp ended: its top reached, or stopped by hand
        self.ramp_notes: list[str] = []  # its clean start: stacks restarted, and why
        self.prep: CleanStart | None = None  # a ramp's clean start, while it runs
        self._ramp_wanted: tuple[int, float] | None = None
        self._restore = 10  # the level to go back to when the ramp ends
        self.stopping = False
        self.ramp_dwell = RAMP_DWELL  # seconds a level (the walkthrough tests shorten it)
        self._last_seq = -1
        self.warmups: dict[str, WarmupTracker] = {}
        # per member: the verdict shown (kinds change only once they have held), and
        # the stall clock that names a wedged server
        self._held: dict[str, VerdictHold] = {}
        self._wedges: dict[str, WedgeWatch] = {}
        self._wedged: dict[str, Wedge | None] = {}
        self.started_at = 0.0
        # observers of commands and ticks (a Recorder): called after each
        self.listeners: list[SessionListener] = []
        self.caption = ""
        self.talk: TalkPlayer | None = None
        self.ghosts: list[Ghost] = []  # earlier runs shown beside the live panes
        # set by a replay (race/recording.py): its position, and the recorded ramp label
        self.replay_status = ""
        self.replay_ramp: str | None = None
        # a replay's view changes (projector mode, the chart, a dialog), for the screen
        self.view_events: list[tuple[str, str]] = []
        # a classic experiment the race replays (a seed preset): its figures and claims
        self.then: Then | None = None
        # `k`: the capacity search under the SLO (race/capacity_live.py), what the last
        # one found, and the level to go back to when it ends
        self.capacity: LiveCapacity | None = None
        self.capacity_results: dict[str, CapacityResult] = {}
        self.capacity_finished = False
        self.capacity_end = ""
        self._capacity_restore: float = 10
        self._slo: Slo | None = None

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
        self._slo = Slo.parse(plan.settings.slo) if plan.settings.slo else None
        self.core.concurrency = plan.concurrency
        self.core.rate = plan.rate
        if placement is None:
            cores = sorted(os.sched_getaffinity(0))
            placement = place("parallel", len(plan.stacks), plan.settings.cpus, cores)
        urls = [UrlHandle(u, i + 1) for i, u in enumerate(plan.urls)]
        self.started_at = self.core.clock()
        await self.core.start(plan.stacks, urls, placement)
        await self.poll()

    async def stop(self) -> None:
        self.stopping = True  # from here on, nothing starts: no ramp, no restart
        self.ramp = None
        self.capacity = None
        self.prep = None
        self._ramp_wanted = None
        try:
            await self.core.stop()
        finally:  # a recording is complete whatever the stop ran into
            for listener in self.listeners:
                close = getattr(listener, "close", None)
                if close is not None:
                    close()

    # --- commands -------------------------------------------------------------------

    async def set_concurrency(self, n: int) -> None:
        """Connections per stack (closed loop), or req/s per stack in rate mode."""
        if self.stopping:
            return
        if self.rate is not None:
            await self.set_rate(float(n))
            return
        await self.core.set_concurrency(n)
        self._new_level()
        self._tell("concurrency", n)

    async def set_rate(self, rate: float | None) -> None:
        """Constant rate per stack in req/s, or None for closed loop."""
        if self.stopping:
            return
        switching = (rate is None) != (self.rate is None)
        await self.core.set_rate(rate)
        if switching:
            # closed-loop levels and rates are different scales: never judge one by the other
            self.levels.clear()
        self._new_level()
        self._tell("rate", rate)

    def _new_level(self) -> None:
        # The running totals become the new level's figures; the first half second is
        # left out so connections opening (or retiring) do not blur the level.
        self.core.reset_totals(warmup=0.5)

    def start_ramp(self, top: int | None = None, dwell: float | None = None) -> None:
        """Step the load from 1 up to `top`, `dwell` seconds a level, from a clean state
        (race/cleanstart.py: every stack idle or restarted first), then go back."""
        top = top or RAMP_TOP
        dwell = dwell or self.ramp_dwell
        if self.stopping:
            return
        self.stop_capacity()
        self.ramp_finished = False
        self.ramp_steps.clear()
        self.ramp_breaking.clear()
        self.ramp_top = top
        self.ramp_end = ""
        self.ramp_notes = []
        self._ramp_wanted = (top, dwell)
        self._restore = self.level

    def stop_ramp(self) -> None:
        """A hand on the load (the slider, `r`, a talk step) stops a ramp; the levels
        it measured stay its findings, and the summary says where it was stopped."""
        if self._ramp_wanted is not None or self.prep is not None:
            self._ramp_wanted = None
            if self.prep is not None:
                self.prep = None
                self.core.hold_attach = False  # the stacks are loaded again as they were
            self._tell("ramp_stop", None)
        if self.ramp is not None:
            level = self.ramp.level
            if level is not None:
                self.ramp_end = f"stopped by hand at {self._level_text(level)}"
                self._keep_ramp_findings()
            self._tell("ramp_stop", level)
        self.ramp = None

    # --- `k`: capacity under the SLO ---------------------------------------------------

    @property
    def slo(self) -> Slo | None:
        """The objective (--slo), parsed once; None without one."""
        return self._slo

    def start_capacity(self, budget_s: float | None = None) -> str:
        """Search every loaded stack's capacity under the SLO at once, from the level
        running now (race/capacity_live.py); the session's poll drives it. Returns why
        it cannot start ("" when it started)."""
        if self.stopping:
            return "stopping"
        if self.slo is None:
            return "no SLO to search under: start with --slo 'p99<50ms'"
        ids = self.core.attached()
        if not ids:
            return "no stack is loaded yet"
        self.stop_ramp()
        self.capacity_finished = False
        self.capacity_results = {}
        self.capacity_end = ""
        self._capacity_restore = float(self.rate) if self.rate is not None else self.concurrency
        s = self.core.settings
        self.capacity = LiveCapacity(
            self.core,
            CapacityPlan(self.slo.text, budget_s=budget_s),
            ids,
            start=float(self.level),
            rate_mode=self.rate is not None,
            max_probe_s=s.duration,
        )
        self._tell("capacity", self.slo.text)
        return ""

    def stop_capacity(self) -> None:
        """A hand on the load stops a capacity search; what it found so far is kept
        (each result says how far it got)."""
        if self.capacity is None:
            return
        self.capacity_results = self.capacity.results()
        self.capacity_end = f"was stopped by hand at probe {self.capacity.round}"
        self.capacity = None
        self._tell("capacity_stop", None)

    async def _advance_capacity(self) -> None:
        if self.capacity is None:
            return
        await self.capacity.advance(self.core.clock())
        if not self.capacity.done:
            return
        self.capacity_results = self.capacity.results()
        self.capacity_end = f"ended after {self.capacity.round} probes"
        self.capacity = None
        self.capacity_finished = True
        # back to the level it started from, every stack at one load again
        restore = self._capacity_restore
        if self.rate is not None:
            await self.core.set_rate(restore)
        else:
            await self.core.set_concurrency(round(restore))
        self._new_level()
        self._tell("capacity_done", None)

    def capacity_ranked(self) -> list[tuple[str, CapacityResult]]:
        """The last search's findings by stack name, best first (report/capacity.py's
        order: the one ranking bench, tune and the app share)."""
        from stackrace.report.capacity import rank_key

        rows = [
            (self.core.members[i].handle.name if i in self.core.members else i, c)
            for i, c in self.capacity_results.items()
        ]
        return sorted(rows, key=lambda r: rank_key(r[1]))

    def _level_text(self, level: int) -> str:
        return f"{level:,} req/s" if self.rate is not None else f"c={level:,}"

    def _keep_ramp_findings(self) -> None:
        for i in self.core.members:
            self.ramp_steps[i] = self.levels.results(i)
            self.ramp_breaking[i] = self.levels.breaking_point(i)

    def _tell(self, what: str, value: object) -> None:
        for listener in self.listeners:
            listener.command(self, what, value)

    def note_view(self, what: str, arg: str = "") -> None:
        """A key changed the view (projector mode, the chart, a dialog, the focused
        pane): not a command to the race, but part of what the room saw, so a
        recording keeps it and a replay shows it again."""
        for listener in self.listeners:
            listener.view(self, what, arg)

    def take_view_events(self) -> list[tuple[str, str]]:
        """A replay's view changes since the last call (the screen applies them)."""
        events, self.view_events = self.view_events, []
        return events

    @property
    def level(self) -> int:
        return round(self.rate) if self.rate is not None else self.concurrency

    # --- polling --------------------------------------------------------------------

    async def poll(self) -> SessionView:
        """Advance everything one tick and return what to show. Call it ~4x/s."""
        if self.stopping:
            return self.view()  # stopping: nothing is attached, started or stepped
        await self.core.poll()
        snap = self.core.engine.latest
        if snap is not None and snap.seq != self._last_seq:
            self._last_seq = snap.seq
            self.levels.feed(snap)
            self._feed_warmups(snap)
            self._feed_wedges(snap)
        await self._advance_talk()
        await self._advance_ramp()
        await self._advance_capacity()
        view = self.view()
        for listener in self.listeners:
            listener.tick(self, view)
        return view

    def play_talk(self, steps: Sequence[TalkStep]) -> None:
        """Play a talk track from the next poll on (race/talk.py)."""
        self.talk = TalkPlayer(list(steps))

    async def _advance_talk(self) -> None:
        if self.talk is None:
            return
        for step in self.talk.due(self.core.clock()):
            if step.say is not None:
                self.caption = step.say
            if step.closed and self.rate is not None:
                self.stop_ramp()
                await self.set_rate(None)
            if step.rate is not None:
                self.stop_ramp()
                await self.set_rate(step.rate)
            if step.concurrency is not None:
                self.stop_ramp()
                await self.set_concurrency(step.concurrency)
            if step.ramp:
                self.start_ramp()
        if self.talk.done:
            self.talk = None

    def _feed_warmups(self, snap) -> None:  # type: ignore[no-untyped-def]
        for t in snap.targets:
            if t.id in self.core.members:
                tracker = self.warmups.setdefault(t.id, WarmupTracker())
                tracker.feed(t.level, t.interval.requests, t.interval.seconds)

    def _feed_wedges(self, snap) -> None:  # type: ignore[no-untyped-def]
        now = self.core.clock()
        for t in snap.targets:
            m = self.core.members.get(t.id)
            if m is not None:
                watch = self._wedges.setdefault(t.id, WedgeWatch())
                self._wedged[t.id] = watch.feed(now, t.interval, m.signs)

    def _verdict(self, mid: str) -> tuple[Verdict | None, str, float | None]:
        """The current level's verdict, its proof and since when (race seconds): a
        wedged server first (race/wedge.py), else the breaking rule's verdict, whose
        kind changes only once it has held (race/verdicts.py)."""
        now = self.core.clock()
        level = self.levels.current_level(mid)
        stall = self._wedged.get(mid)
        if stall is not None and level is not None:
            return stall.verdict(level), stall.proof(), stall.since - self.started_at
        fresh = self.levels.verdict_now(mid)
        proof = explain.proof(fresh, self._step_at(mid, fresh.level)) if fresh else ""
        hold = self._held.setdefault(mid, VerdictHold())
        shown = hold.feed(now, level, fresh, proof, judged=self._judged(mid))
        if shown.verdict is None:
            return None, "", None
        proof = shown.proof
        m = self.core.members.get(mid)
        target = self.core.target(mid)
        note = wedge.backlog_note(m.signs if m else None, target.interval if target else None)
        if note:
            proof = f"{proof} · {note}"
        since = shown.since - self.started_at if shown.since is not None else None
        return shown.verdict, proof, since

    def _loads(self) -> str:
        """Your requests as a pane's header names them (empty: the workload's path)."""
        kinds = self.core.request_kinds() if self.core.settings.own_requests else None
        if not kinds:
            return ""
        from stackrace.scenario import describe

        return ("" if kinds[0].method != "GET" or len(kinds) > 1 else "GET ") + describe(kinds)

    def _judged(self, mid: str) -> bool:
        """Whether this visit of the running level has been measured long enough."""
        step = self.levels.current_step(mid)
        return step is not None and step.enough

    def _compared(self, mid: str) -> bool:
        level = self.levels.current_level(mid)
        if level is None:
            return False
        return level <= 1 or any(s.level < level for s in self.levels.results(mid))

    def _step_at(self, mid: str, level: int) -> StepResult | None:
        return next((s for s in self.levels.results(mid) if s.level == level), None)

    def _cpu_of(self, member_id: str) -> CpuShare:
        """The stack's CPU for the verdict: what it used, what it can use, how long it
        waited for a core, and whether the cores it shares with other stacks were full.
        On a core shared by four stacks each uses a quarter of it and waits the rest:
        the race's verdict is the full core, not each stack's (race/verdicts.py)."""
        m = self.core.members.get(member_id)
        if m is None or m.resources is None:
            return CpuShare()
        r = m.resources
        shared = self.shared_core()
        return CpuShare(
            used=r.cpu_percent,
            capacity=self.core.capacity(member_id),
            waited=r.cpu_wait_percent,
            core_full=shared is not None and shared.full and m.stack_cpus is not None,
        )

    def shared_core(self) -> SharedCore | None:
        """The cores the stacks share, from every running stack's CPU (None when each
        stack has cores of its own: then every verdict is the stack's)."""
        if self.synthetic:
            return None  # (a model knows nothing of sharing a core)
        return verdicts.shared_core_of(self.core)

    async def _advance_ramp(self) -> None:
        now = self.core.clock()
        if self._ramp_wanted is not None and self.prep is None:
            # the clean start: targets removed, every stack idle or restarted first
            self.prep = await CleanStart.begin(self.core, now)
            self._tell("ramp_prep", self._ramp_wanted[0])
        if self.prep is not None and self._ramp_wanted is not None:
            top, dwell = self._ramp_wanted
            first = Ramp.from_level(1, top=top, dwell=dwell, restore=self._restore)
            if not self.prep.ready:
                if not await self.prep.step(self.core, now):
                    return
                # the stacks are loaded again from the ramp's first level
                self.prep.ready = True
                if self.rate is not None:
                    self.core.rate = float(first.levels[0])
                else:
                    self.core.concurrency = first.levels[0]
                self.core.hold_attach = False
            if not self.prep.loaded(self.core, now):
                return
            self.ramp_notes = list(self.prep.notes)
            self.prep = None
            self._ramp_wanted = None
            # every stack loaded: the ramp begins, on an empty level log, with no stall
            # remembered from before the clean start (a restarted stack's own clock)
            self._wedges.clear()
            self._wedged.clear()
            self.levels.clear()
            self.levels.counting_again()
            self.ramp = first
            self._tell("ramp", top)
        if self.ramp is None:
            return
        if not self.ramp.done and self._ramp_ends():
            # the ramp's findings, before the restored level adds to the log
            self._keep_ramp_findings()
            self.ramp_end = f"ran to its top, {self._level_text(self.ramp.levels[-1])}"
        first_level = self.ramp.started_at is None
        # it runs to its top: a stack broken early still shows what the higher levels
        # do to it (c=1000 is where the sync worker stops answering at all)
        level = self.ramp.advance(now)
        if level is not None:
            await self.set_concurrency(level)
            if first_level:
                self.levels.counting_again()
        if self.ramp.done:
            self.ramp = None
            self.ramp_finished = True
            self._tell("ramp_done", None)

    def _ramp_ends(self) -> bool:
        r = self.ramp
        if r is None or r.started_at is None:
            return False
        due = int((self.core.clock() - r.started_at) // r.dwell)
        return due > r.index and due >= len(r.levels)

    def view(self) -> SessionView:
        snap = self.core.engine.latest
        panes = []
        rate_mode = self.rate is not None
        probing = self.capacity.loads() if self.capacity is not None else {}
        for mid, m in self.core.members.items():
            target = self.core.target(mid)
            state = m.handle.state
            little = None
            share = 0.0
            limit = ""
            cpu_us = None
            verdict, proof, since = self._verdict(mid) if target is not None else (None, "", None)
            warm = self.warmups.get(mid)
            warming = (
                warm is not None
                and warm.warming
                and state == StackState.READY
                and target is not None
            )
            if warming:
                state = StackState.WARMING
            annotation = behind = ""
            if target is not None:
                share = accounting.engine_share(target.total)
                limit = accounting.engine_limit(target.total, target.saturated)
                if not rate_mode:
                    little = accounting.little_check(target.total, target.concurrency)
                cpu_us = self.core.cpu_per_request_us(mid, target.total.requests)
                behind = explain.behind_schedule(self.rate, target.total)
                res = m.resources
                stall = self._wedged.get(mid)
                annotation = explain.annotate(
                    verdict=verdict,
                    interval=target.interval,
                    total=target.total,
                    rate=self.rate,
                    timeout=self.core.settings.timeout,
                    cpu_percent=res.cpu_percent if res is not None else None,
                    cpu_capacity=self.core.capacity(mid),
                    cpu_us_per_request=cpu_us,
                    warming=warming,
                    climb=warm.climb() if warm is not None else None,
                    engine_limit=limit,
                    timeout_cause=wedge.timeout_cause(m.signs),
                )
                core_share = self._core_share(mid)
                if core_share and not annotation:
                    alone = verdicts.alone_on_a_core(cpu_us)
                    if alone is not None:
                        annotation = (
                            f"alone on a core: ≈ {alone:,.0f} req/s "
                            f"(its {cpu_us:,.0f} µs of CPU per request)"
                        )
                if stall is not None and stall.evidence and not annotation:
                    annotation = f"wedged: {stall.evidence[0]}"
            flag = slo_flag(self.slo, target.total) if self.slo and target is not None else None
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
                    verdict=verdict,
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
                    proof=proof,
                    annotation=annotation,
                    behind=behind,
                    warm_climb=warm.climb() if warming and warm is not None else None,
                    url=m.url,
                    loads=self._loads(),
                    synthetic=self.synthetic,
                    judged=self._judged(mid),
                    compared=self._compared(mid),
                    verdict_since=since,
                    wedged=self._wedged.get(mid) is not None and target is not None,
                    core_share=self._core_share(mid) if target is not None else "",
                    slo_meets=flag.meets if flag is not None else None,
                    slo_text=flag.text if flag is not None else "",
                    capacity_load=probing.get(mid),
                )
            )
        ramp = self.replay_ramp
        if self.prep is not None:
            ramp = self.prep.status()
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
        # during a capacity search each stack has a load of its own: the slider shows
        # the highest being probed (each pane's head shows its own)
        top = max(probing.values(), default=None)
        concurrency = self.concurrency
        rate = self.rate
        if top is not None:
            if rate_mode:
                rate = top
            else:
                concurrency = round(top)
        return SessionView(
            seq=snap.seq if snap is not None else 0,
            panes=panes,
            concurrency=concurrency,
            rate=rate,
            engine_cpu=snap.engine_cpu if snap is not None else 0.0,
            saturated=snap.saturated if snap is not None else False,
            ramp=ramp,
            ramp_done=self.ramp_finished,
            errors=[*self.core.errors, *self.core.engine.errors],
            placement=placement.note if placement else "",
            shared_cores=placement.shared if placement else False,
            timeout=self.core.settings.timeout,
            keepalive=self.core.settings.keepalive,
            synthetic=self.synthetic,
            caption=self.caption,
            ramp_top=self.ramp_top,
            replay=self.replay_status,
            ghosts=[pv for g in self.ghosts for pv in g.view(self.level, rate_mode)],
            database=database,
            shared=self.shared_core(),
            clock=self.core.clock() - self.started_at,
            slo=self.slo.text if self.slo else "",
            slo_target_us=self.slo.latency_target_us if self.slo else None,
            slo_quantile=self.slo.quantile if self.slo else None,
            capacity=self.capacity.status() if self.capacity is not None else None,
            capacity_done=self.capacity_finished,
        )

    def _core_share(self, mid: str) -> str:
        return verdicts.core_share(self.levels.current_step(mid))

    @property
    def synthetic(self) -> bool:
        return bool(getattr(self.core.engine, "synthetic", False))

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

    def then_now(self) -> ThenNow | None:
        """The classic experiment's claims judged on every level measured so far (the
        last ramp's and those explored since); None when the race replays none."""
        if self.then is None or self.rate is not None:
            return None
        steps = {}
        for mid in self.core.members:
            by = {s.level: s for s in self.ramp_steps.get(mid, [])}
            by.update({s.level: s for s in self.levels.results(mid)})
            steps[mid] = [by[k] for k in sorted(by)]
        names = {mid: m.handle.name for mid, m in self.core.members.items()}
        return judge_live(self.then, steps, names)

    @property
    def summary_from_ramp(self) -> bool:
        """Whether `summary()` shows the last ramp's findings (else the levels explored)."""
        return self.ramp is None and bool(self.ramp_steps)

    def summary(self) -> list[SummaryRow]:
        """Per member: the last finished ramp's levels if there was one (its findings
        survive the exploring that follows), else the levels measured so far."""
        rows = []
        from_ramp = self.summary_from_ramp
        for mid, m in self.core.members.items():
            if from_ramp:
                steps = list(self.ramp_steps.get(mid, []))
                breaking = self.ramp_breaking.get(mid)
            else:
                steps = self.levels.results(mid)
                breaking = self.levels.breaking_point(mid)
            at = next((s for s in steps if breaking and s.level == breaking.level), None)
            rows.append(
                SummaryRow(
                    id=mid,
                    name=m.handle.name,
                    peak=peak(steps),
                    breaking=breaking,
                    mem_before=m.baseline,
                    mem_after=m.resources,
                    mem_peak=m.mem_peak,
                    steps=tuple(steps),
                    why=explain.proof(breaking, at) if breaking else "",
                )
            )
        return rows


class SessionListener(Protocol):
    """Told about every command and every tick (a race recorder is one)."""

    def command(self, session: Session, what: str, value: object) -> None: ...
    def tick(self, session: Session, view: SessionView) -> None: ...
    def view(self, session: Session, what: str, arg: str) -> None: ...
