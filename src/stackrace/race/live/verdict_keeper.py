"""The app's verdicts kept per member: what each pane says of its stack, and since when.

    keeper = VerdictKeeper(core, levels)
    keeper.feed(snapshot, now)                      # each new engine interval
    verdict, proof, since = keeper.verdict("uvicorn", now, started_at)

Three things decide a pane's verdict, and they are kept here, apart from the session's
commands (race/live/session.py) and from how a view is drawn up (race/live/view.py):

- a **wedged** server first: it answers nothing while clients wait (rules/wedge.py,
  each member's stall clock fed each interval and its signs);
- else the breaking rule's verdict at the current level (stackrace.rules.breaking through
  the level log, stackrace.rules.levels), whose kind changes only once it has held
  (race/live/verdicts.py `VerdictHold`), with its proof in figures (race/live/explain.py) and a
  note of the accept queue behind it;
- the CPU a verdict weighs (`cpu_of`): what the stack used, could use and waited
  for, and whether the cores it shares were full (`shared_core`);
- and, beside them, each member's **warm-up** (rules/warmup.py: a JIT still climbing).

`judged` and `compared` say how much a "no verdict" claims: the running level was
measured long enough, and a lower level was measured too.
"""

from __future__ import annotations

from stackrace.engine.model import EngineSnapshot
from stackrace.race.core.core import RaceCore
from stackrace.race.live import explain, verdicts
from stackrace.race.live.verdicts import SharedCore, VerdictHold
from stackrace.rules import wedge
from stackrace.rules.breaking import CpuShare, LevelVerdict, StepResult
from stackrace.rules.levels import LevelLog
from stackrace.rules.warmup import WarmupTracker
from stackrace.rules.wedge import Wedge, WedgeWatch


class VerdictKeeper:
    """Per member: its warm-up, its stall clock, and the verdict shown."""

    def __init__(self, core: RaceCore, levels: LevelLog) -> None:
        self.core = core
        self.levels = levels
        self.warmups: dict[str, WarmupTracker] = {}
        # the verdict shown (kinds change only once they have held), and the stall
        # clock that names a wedged server
        self.held: dict[str, VerdictHold] = {}
        self.wedges: dict[str, WedgeWatch] = {}
        self.wedged: dict[str, Wedge | None] = {}

    @property
    def synthetic(self) -> bool:
        """A model's figures (--demo, a replay of one), not a measurement."""
        return bool(getattr(self.core.engine, "synthetic", False))

    def cpu_of(self, member_id: str) -> CpuShare:
        """The stack's CPU for the verdict: what it used, what it can use, how long it
        waited for a core, and whether the cores it shares with other stacks were full.
        On a core shared by four stacks each uses a quarter of it and waits the rest:
        the race's verdict is the full core, not each stack's (race/live/verdicts.py)."""
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

    def feed(self, snap: EngineSnapshot, now: float) -> None:
        """A new engine interval: each member's warm-up and stall clock move on."""
        for t in snap.targets:
            m = self.core.members.get(t.id)
            if m is None:
                continue
            tracker = self.warmups.setdefault(t.id, WarmupTracker())
            tracker.feed(t.level, t.interval.requests, t.interval.seconds)
            watch = self.wedges.setdefault(t.id, WedgeWatch())
            self.wedged[t.id] = watch.feed(now, t.interval, m.signs)

    def forget_stalls(self) -> None:
        """A clean start: no stall remembered from before it (a restarted stack's own)."""
        self.wedges.clear()
        self.wedged.clear()

    def clear(self) -> None:
        """Everything kept (a replay going back in time)."""
        self.warmups.clear()
        self.held.clear()
        self.forget_stalls()

    def wedge(self, mid: str) -> Wedge | None:
        return self.wedged.get(mid)

    def verdict(
        self, mid: str, now: float, started_at: float
    ) -> tuple[LevelVerdict | None, str, float | None]:
        """The current level's verdict, its proof and since when (race seconds): a
        wedged server first, else the breaking rule's verdict once it has held."""
        level = self.levels.current_level(mid)
        stall = self.wedged.get(mid)
        if stall is not None and level is not None:
            return stall.verdict(level), stall.proof(), stall.since - started_at
        fresh = self.levels.verdict_now(mid)
        proof = explain.proof(fresh, self.step_at(mid, fresh.level)) if fresh else ""
        hold = self.held.setdefault(mid, VerdictHold())
        shown = hold.feed(now, level, fresh, proof, judged=self.judged(mid))
        if shown.verdict is None:
            return None, "", None
        proof = shown.proof
        m = self.core.members.get(mid)
        target = self.core.target(mid)
        note = wedge.backlog_note(m.signs if m else None, target.interval if target else None)
        if note:
            proof = f"{proof} · {note}"
        since = shown.since - started_at if shown.since is not None else None
        return shown.verdict, proof, since

    def judged(self, mid: str) -> bool:
        """Whether this visit of the running level has been measured long enough."""
        step = self.levels.current_step(mid)
        return step is not None and step.enough

    def compared(self, mid: str) -> bool:
        """Whether a lower level was measured too (or this is c=1): the breaking rule
        compares levels, so without one "not broken" would claim more than was tested."""
        level = self.levels.current_level(mid)
        if level is None:
            return False
        return level <= 1 or any(s.level < level for s in self.levels.results(mid))

    def step_at(self, mid: str, level: int) -> StepResult | None:
        return next((s for s in self.levels.results(mid) if s.level == level), None)
