"""The app's race: the race core driven by the user, with no UI in it.

    session = Session(core)
    await session.start(RacePlan(stacks=("uvicorn", "gunicorn-sync")))
    view = await session.poll()            # call ~4x/s: readiness, targets, levels, ramp
    await session.set_level(200)       # every running stack at once, live
    session.start_ramp()                   # step up through the levels, mark verdicts
    await session.stop()                   # stop the load and every stack

`poll()` returns a `SessionView` (race/live/view.py): a `PaneView` per stack or URL
target. Decisions live here (commands: levels, rate, ramps, a talk track; ticks), in the
core, race/live/verdict_keeper.py, `stackrace.rules` and `stackrace.rules.level_log`; the UI
only draws views and forwards commands.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Protocol

import msgspec

from stackrace.base.printable import terminal
from stackrace.race.core.cleanstart import CleanStart
from stackrace.race.core.core import RaceCore
from stackrace.race.core.members import LoadEngine
from stackrace.race.core.placement import CorePlacement, place
from stackrace.race.core.plan import RacePlan
from stackrace.race.core.series import SecondsAdder, SeriesRecorder
from stackrace.race.core.urls import UrlHandle
from stackrace.race.live.ranking import CapacityRanking
from stackrace.race.live.talk import TalkPlayer, TalkStep
from stackrace.race.live.thennow import ThenNow
from stackrace.race.live.verdict_keeper import VerdictKeeper
from stackrace.race.live.view import (
    SessionView,
    SummaryRow,
    percentile_curve,
    session_view,
    summary_rows,
    then_now_of,
)
from stackrace.race.live.why_view import capture_now, evidence_text, flame_of
from stackrace.race.playback.ghost import Ghost
from stackrace.report.schema import Then
from stackrace.report.slo import Slo
from stackrace.rules.breaking import LevelVerdict, StepResult
from stackrace.rules.cores import SharedCore
from stackrace.rules.level_log import LevelLog, Ramp
from stackrace.settings.race_parsers import slo_terms

RAMP_TOP = 2000  # `r` ramps from 1 to here
RAMP_DWELL = 3.0  # seconds a level


class Session:
    """Starts stacks, loads them when ready, tracks levels, runs ramps."""

    def __init__(self, core: RaceCore) -> None:
        self.core = core
        self.plan = RacePlan()
        # an h2 member's level is its requests in flight, as every other's (core.level_of)
        self.levels = LevelLog(cpu_of=lambda mid: self.keeper.cpu_of(mid), level_of=core.level_of)
        self.ramp: Ramp | None = None
        self.ramp_finished = False
        # what the last ramp found, per member: kept when the load is explored afterwards
        self.ramp_steps: dict[str, list[StepResult]] = {}
        self.ramp_breaking: dict[str, LevelVerdict | None] = {}
        self.ramp_top = 0
        self.ramp_end = ""  # why the last ramp ended: its top reached, or stopped by hand
        self.ramp_notes: list[str] = []  # its clean start: stacks restarted, and why
        self.prep: CleanStart | None = None  # a ramp's clean start, while it runs
        self._ramp_wanted: tuple[int, float] | None = None
        self._restore = 10  # the level to go back to when the ramp ends
        self.stopping = False
        self.ramp_dwell = RAMP_DWELL  # seconds a level (the walkthrough tests shorten it)
        self._last_seq = -1
        # per member: warm-up, stall clock and the verdict shown (race/live/verdict_keeper.py)
        self.keeper = VerdictKeeper(core, self.levels)
        self.started_at = 0.0
        # observers of commands and ticks (a Recorder): called after each
        self.listeners: list[SessionListener] = []
        self.caption = ""
        self.talk: TalkPlayer | None = None
        self.ghosts: list[Ghost] = []  # earlier runs shown beside the live panes
        # set by a replay (race/playback/recording.py): its position, and the recorded ramp label
        self.replay_status = ""
        self.replay_ramp: str | None = None
        # a replay's view changes (projector mode, the chart, a dialog), for the screen
        self.view_events: list[tuple[str, str]] = []
        # a classic experiment the race replays (a seed preset): its figures and claims
        self.then: Then | None = None
        self.slo: Slo | None = None  # --slo, parsed once (the flag, the chart, `k`)
        self.ranking = CapacityRanking(self)  # `k`: capacity under the SLO (race/live/ranking.py)
        self.ended = ""  # why the race ended on its own (the stacks' host was lost)
        # the race second by second, from its start (race/core/series.py): the HTML page
        # `e` writes in the summary (race/live/page.py)
        self.series: SecondsAdder = SecondsAdder()
        # per member: whether its verdict was a breaking state at the last tick (a turn
        # to one starts an evidence window: race/core/evidence_keeper.py)
        self._broken: dict[str, bool] = {}

    @property
    def engine(self) -> LoadEngine:
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

    async def start(self, plan: RacePlan, placement: CorePlacement | None = None) -> None:
        """Start the engine and every chosen stack; URL targets are loaded at once."""

        self.plan = plan
        self.core.settings = plan.settings
        self.slo = Slo.parse(plan.settings.slo) if plan.settings.slo else None
        self.keeper.slo = self.slo  # a missed SLO is never "keeping up"
        self.core.concurrency = plan.concurrency
        self.core.rate = plan.rate
        if placement is None:
            cores = sorted(os.sched_getaffinity(0))
            placement = place("parallel", len(plan.stacks), plan.settings.cpus, cores)
        urls = [UrlHandle(u, i + 1) for i, u in enumerate(plan.urls)]
        self.started_at = self.core.clock()
        self.series = SeriesRecorder(self.core)
        await self.core.start(plan.stacks, urls, placement)
        await self.poll()

    async def stop(self) -> None:
        self.stopping = True  # from here on, nothing starts: no ramp, no restart
        self.ramp = self.ranking.search = None
        self.prep = None
        self._ramp_wanted = None
        try:
            await self.core.stop()
        finally:  # a recording is complete whatever the stop ran into
            for listener in self.listeners:
                listener.close()

    # --- commands -------------------------------------------------------------------

    async def set_level(self, n: int) -> None:
        """The level the user sets (the slider, a ramp, a talk step): req/s per stack in
        rate mode, connections per stack otherwise, as RaceCore.set_level decides for
        every driver; recorded as the command it was (`rate` or `concurrency`)."""
        if self.stopping:
            return
        await self.core.set_level(n)
        self.new_level()
        if self.rate is not None:
            self.tell("rate", float(n))
        else:
            self.tell("concurrency", n)

    async def set_rate(self, rate: float | None) -> None:
        """Constant rate per stack in req/s, or None for closed loop."""
        if self.stopping:
            return
        switching = (rate is None) != (self.rate is None)
        await self.core.set_rate(rate)
        if switching:
            # closed-loop levels and rates are different scales: never judge one by the other
            self.levels.clear()
        self.new_level()
        self.tell("rate", rate)

    def new_level(self) -> None:
        # The running totals become the new level's figures; the first half second is
        # left out so connections opening (or retiring) do not blur the level.
        self.core.reset_totals(warmup=0.5)

    def start_ramp(self, top: int | None = None, dwell: float | None = None) -> None:
        """Step the load from 1 up to `top`, `dwell` seconds a level, from a clean state
        (race/core/cleanstart.py: every stack idle or restarted first), then go back."""
        top = top or RAMP_TOP
        dwell = dwell or self.ramp_dwell
        if self.stopping:
            return
        self.ranking.stop()
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
            self.tell("ramp_stop", None)
        if self.ramp is not None:
            level = self.ramp.level
            if level is not None:
                self.ramp_end = f"stopped by hand at {self._level_text(level)}"
                self._keep_ramp_findings()
            self.tell("ramp_stop", level)
        self.ramp = None

    def _level_text(self, level: int) -> str:
        return f"{level:,} req/s" if self.rate is not None else f"c={level:,}"

    def _keep_ramp_findings(self) -> None:
        for i in self.core.members:
            self.ramp_steps[i] = self.levels.results(i)
            self.ramp_breaking[i] = self.levels.breaking_point(i)

    def tell(self, what: str, value: object) -> None:
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
        lost = self.core.host_lost()
        if lost and not self.ended:
            # the stacks' host is gone (a cluster's app host): nothing is left to load;
            # the engines stop (on a cluster, their processes on the load hosts end)
            self.ended = f"{lost}: the race ended"
            self.ramp = None
            await self.core.stop()
        await self.core.poll()
        snap = self.core.engine.latest
        if snap is not None and snap.seq != self._last_seq:
            self._last_seq = snap.seq
            self.levels.feed(snap)
            self.keeper.feed(snap, self.core.clock())
        await self._advance_talk()
        await self._advance_ramp()
        await self.ranking.advance()
        view = self.view()
        self._evidence_at_breaking(view)
        for listener in self.listeners:
            listener.tick(self, view)
        return view

    def _evidence_at_breaking(self, view: SessionView) -> None:
        """A verdict that turned to a breaking state (the slider, a ramp, a talk step,
        a capacity probe) starts one evidence window of that stack, captured while the
        load goes on; the tick does not wait for it."""
        for pane in view.panes:
            broken = pane.judgment is not None and pane.judgment.broken
            was = self._broken.get(pane.id, False)
            self._broken[pane.id] = broken
            m = self.core.members.get(pane.id)
            if broken and not was and m is not None and pane.judgment is not None:
                self.core.evidence.want(m, pane.judgment.level)

    def play_talk(self, steps: Sequence[TalkStep]) -> None:
        """Play a talk track from the next poll on (race/live/talk.py)."""
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
                if self.rate is not None:
                    # connections are a closed loop's level: never read as req/s
                    await self.set_rate(None)
                await self.set_level(step.concurrency)
            if step.ramp:
                self.start_ramp()
        if self.talk.done:
            self.talk = None

    def shared_core(self) -> SharedCore | None:
        """See VerdictKeeper.shared_core."""
        return self.keeper.shared_core()

    async def _advance_ramp(self) -> None:
        now = self.core.clock()
        if self._ramp_wanted is not None and self.prep is None:
            # the clean start: targets removed, every stack idle or restarted first
            self.prep = await CleanStart.begin(self.core, now)
            self.tell("ramp_prep", self._ramp_wanted[0])
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
            self.keeper.forget_stalls()
            self.levels.clear()
            self.levels.counting_again()
            self.ramp = first
            self.tell("ramp", top)
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
            await self.set_level(level)
            if first_level:
                self.levels.counting_again()
        if self.ramp.done:
            self.ramp = None
            self.ramp_finished = True
            self.tell("ramp_done", None)

    def _ramp_ends(self) -> bool:
        r = self.ramp
        if r is None or r.started_at is None:
            return False
        due = int((self.core.clock() - r.started_at) // r.dwell)
        return due > r.index and due >= len(r.levels)

    def view(self) -> SessionView:
        """What to show now (race/live/view.py)."""
        return session_view(self)

    @property
    def synthetic(self) -> bool:
        return self.keeper.synthetic

    # --- on demand ------------------------------------------------------------------

    def percentile_curve(self, pane_id: str, points: Sequence[float]) -> list[tuple[float, int]]:
        """Latency at each percentile, at the current level (race/live/view.py)."""
        return percentile_curve(self, pane_id, points)

    def log_text(self, pane_id: str, lines: int = 200) -> str:
        m = self.core.members.get(pane_id)
        if m is None:
            return ""
        text = "\n".join(m.handle.log_tail(lines))
        text = f"engine refused it: {m.refused}\n{text}" if m.refused else text
        return terminal(text, newlines=True)  # the log view (`l`) shows a server's bytes

    def evidence_text(self, pane_id: str) -> list[str]:
        """What `w` shows of a member (race/live/why_view.py)."""
        return evidence_text(self, pane_id)

    def flame(self, pane_id: str) -> tuple[str, str] | None:
        """The latest window's flame graph: (file name, SVG) (race/live/why_view.py)."""
        return flame_of(self, pane_id)

    def capture_evidence(self, pane_id: str) -> bool:
        """`w` on a member with no window at the level running now: capture one."""
        if self.core.evidence.at(pane_id, self.level) is not None:
            return False
        return capture_now(self, pane_id)

    def set_slo(self, text: str) -> str:
        """The SLO given in the app (`k` started without --slo): parsed and checked as
        --slo is (settings/race_parsers.py), held to every level from now on; why it
        is refused ("" when set)."""

        try:
            checked = slo_terms(text)
            slo = Slo.parse(checked)
        except ValueError as exc:  # (OptionValueError, TermError: the term and why)
            return str(exc)
        self.slo = slo
        self.keeper.slo = slo  # a missed SLO is never "keeping up"
        self.core.settings = msgspec.structs.replace(self.core.settings, slo=checked)
        return ""

    def then_now(self) -> ThenNow | None:
        """The classic experiment's claims judged on the levels measured (None: none)."""
        return then_now_of(self)

    @property
    def summary_from_ramp(self) -> bool:
        """Whether `summary()` shows the last ramp's findings (else the levels explored)."""
        return self.ramp is None and bool(self.ramp_steps)

    def summary(self) -> list[SummaryRow]:
        """Per member: the last finished ramp's levels if there was one (its findings
        survive the exploring that follows), else the levels measured so far."""
        return summary_rows(self)


class SessionListener(Protocol):
    """Told about every command and every tick (a race recorder is one)."""

    def command(self, session: Session, what: str, value: object) -> None: ...
    def tick(self, session: Session, view: SessionView) -> None: ...
    def view(self, session: Session, what: str, arg: str) -> None: ...
    def close(self) -> None:
        """The session stopped: nothing more comes (a recorder closes its file)."""
        ...
