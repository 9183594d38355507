"""The app's judgments kept per member: what each pane says of its stack, and since when.

    keeper = VerdictKeeper(core, levels)
    keeper.feed(snapshot, now)                      # each new engine interval
    judgment, since = keeper.judgment("uvicorn", now, started_at)

A pane's judgment is the rules' (stackrace.rules.level) on the evidence gathered here,
apart from the session's commands (race/live/session.py) and from how a view is drawn
up (race/live/view.py):

- the level running now, as the level log has it (stackrace.rules.level_log: its totals,
  its fastest answer, the engine's limit) and the CPU it weighs (`cpu_of`: what the
  stack used, could use and waited for over the level's samples so far — one second's
  sample would make a judgment flip with it — and whether the cores it shares were
  full);
- the levels measured before (their fastest answers: how long it takes to serve one);
- the last `RECENT_S` seconds of intervals (failing as soon as most of what ends fails);
- its accept queue at the level (the kernel's, from its signs: the server's own evidence
  that every worker was busy, whoever else held its core: rules/level.py);
- each member's stall clock and what the kernel, its log and its processes show
  (rules/wedge.py), its warm-up (rules/warmup.py) and, with --slo, whether the level
  meets it (race/live/slo_flag.py);

and the state shown changes toward worse at once, toward better once it has held
(race/verdicts.py `JudgmentHold`).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import deque
from dataclasses import dataclass

from stackrace.engine.model import EngineSnapshot, WindowStats
from stackrace.race.core.core import RaceCore
from stackrace.race.live import verdicts
from stackrace.race.live.slo_flag import slo_flag
from stackrace.race.live.verdicts import JudgmentHold
from stackrace.report.slo import Slo
from stackrace.rules import wedge
from stackrace.rules.breaking import CpuShare, StepResult
from stackrace.rules.cores import SharedCore
from stackrace.rules.level import BROKEN, Evidence, Judgment, judge
from stackrace.rules.level_log import LevelLog
from stackrace.rules.warmup import WarmupTracker
from stackrace.rules.wedge import Wedge, WedgeWatch
from stackrace.stacks.sampler import ResourceSample
from stackrace.stacks.signs import ServerSigns

RECENT_S = 2.0  # seconds of intervals that show failing at once


@dataclass
class _LevelCpu:
    """A member's CPU samples at one level, added up."""

    level: int | None
    last_t: float | None = None  # the last sample's time (a replay decodes it anew)
    used: float = 0.0
    waited: float = 0.0
    n: int = 0
    # its accept queue at the level (the kernel's, from its signs: gathered once a
    # second while requests wait on a busy core), and the last signs' time counted
    queue: list[int] = dataclasses.field(default_factory=list)
    signs_t: float | None = None


class VerdictKeeper:
    """Per member: its warm-up, its stall clock, its recent intervals and the judgment
    shown."""

    def __init__(self, core: RaceCore, levels: LevelLog) -> None:
        self.core = core
        self.levels = levels
        self.slo: Slo | None = None  # --slo (the session sets it)
        self.warmups: dict[str, WarmupTracker] = {}
        self.held: dict[str, JudgmentHold] = {}
        self.wedges: dict[str, WedgeWatch] = {}
        self.wedged: dict[str, Wedge | None] = {}
        self.recent: dict[str, deque[tuple[int, WindowStats]]] = {}
        self.cpu_at_level: dict[str, _LevelCpu] = {}  # per member, at its level now

    @property
    def synthetic(self) -> bool:
        """A model's figures (--demo, a replay of one), not a measurement."""
        return self.core.engine.synthetic

    def cpu_of(self, member_id: str) -> CpuShare:
        """The stack's CPU for the judgment: what it used, what it can use, how long it
        waited for a core, and whether the cores it shares with other stacks were full.
        On a core shared by four stacks each uses a quarter of it and waits the rest:
        the race's verdict is the full core, not each stack's (stackrace.rules.cores)."""
        m = self.core.members.get(member_id)
        if m is None or m.resources is None:
            return CpuShare()
        used, waited = self._level_cpu(member_id, m.resources)
        shared = self.shared_core()
        return CpuShare(
            used=used,
            capacity=self.core.capacity(member_id),
            waited=waited,
            core_full=shared is not None and shared.full and m.stack_cpus is not None,
        )

    def _level_cpu(self, mid: str, latest: ResourceSample) -> tuple[float, float]:
        """The stack's CPU and wait for a core, averaged over the samples seen at the
        level running now (`feed`); the latest sample before any."""
        acc = self.cpu_at_level.get(mid)
        if acc is None or not acc.n or acc.level != self.levels.current_level(mid):
            return latest.cpu_percent, latest.cpu_wait_percent
        return acc.used / acc.n, acc.waited / acc.n

    def _see_level(
        self, mid: str, level: int, r: ResourceSample | None, signs: ServerSigns | None
    ) -> None:
        """One more CPU sample and accept-queue look at `level`, each counted once (by
        its time: live and in a replay alike, whenever the view is drawn). The ones in
        hand when the level begins were taken before it (a sample covers the second
        before it): they are not the level's, and a level's first seconds judged on an
        idle second's CPU read a busy core's queue as the server's (issue 47: gevent
        "QUEUEING at c=10" for seconds while it waited 76 % for its core)."""
        acc = self.cpu_at_level.get(mid)
        if acc is None or acc.level != level:
            acc = self.cpu_at_level[mid] = _LevelCpu(level)
            acc.last_t = r.t if r is not None else None
            acc.signs_t = signs.t if signs is not None else None
            return
        if r is not None and acc.last_t != r.t:
            acc.last_t = r.t
            acc.used += r.cpu_percent
            acc.waited += r.cpu_wait_percent
            acc.n += 1
        if signs is not None and signs.listen is not None and acc.signs_t != signs.t:
            acc.signs_t = signs.t
            if signs.listen.listening:
                acc.queue.append(signs.listen.accept_queue)

    def cpu_pending(self, mid: str) -> bool:
        """The stack is sampled, but no sample of its own at the level running now yet:
        its wait for a core there is not known (rules/level.py holds back a queue that
        a busy core could explain)."""
        m = self.core.members.get(mid)
        if m is None or m.resources is None or self.synthetic:
            return False
        acc = self.cpu_at_level.get(mid)
        return acc is None or acc.level != self.levels.current_level(mid) or not acc.n

    def accept_queue(self, mid: str) -> int | None:
        """The median of its accept queue's looks at the level running now (a line
        that held, not one moment's); None when not looked at there."""
        acc = self.cpu_at_level.get(mid)
        if acc is None or not acc.queue or acc.level != self.levels.current_level(mid):
            return None
        return round(statistics.median(acc.queue))

    def shared_core(self) -> SharedCore | None:
        """The cores the stacks share, from every running stack's CPU (None when each
        stack has cores of its own: then every verdict is the stack's)."""
        if self.synthetic:
            return None  # (a model knows nothing of sharing a core)
        return verdicts.shared_core_of(self.core)

    def feed(self, snap: EngineSnapshot, now: float) -> None:
        """A new engine interval: each member's warm-up, stall clock and recent
        intervals move on."""
        for t in snap.targets:
            m = self.core.members.get(t.id)
            if m is None:
                continue
            tracker = self.warmups.setdefault(t.id, WarmupTracker())
            tracker.feed(t.level, t.interval.requests, t.interval.seconds)
            self._see_level(t.id, t.level, m.resources, m.signs)
            watch = self.wedges.setdefault(t.id, WedgeWatch())
            self.wedged[t.id] = watch.feed(now, t.interval, m.signs)
            recent = self.recent.setdefault(t.id, deque())
            if recent and recent[-1][0] != t.level:
                recent.clear()  # the last seconds of this level only
            recent.append((t.level, t.interval))
            while sum(w.seconds for _l, w in recent) > RECENT_S + 1e-6 and len(recent) > 1:
                recent.popleft()

    def forget_stalls(self) -> None:
        """A clean start: no stall remembered from before it (a restarted stack's own)."""
        self.wedges.clear()
        self.wedged.clear()
        self.recent.clear()

    def clear(self) -> None:
        """Everything kept (a replay going back in time)."""
        self.warmups.clear()
        self.held.clear()
        self.cpu_at_level.clear()
        self.forget_stalls()

    def wedge(self, mid: str) -> Wedge | None:
        return self.wedged.get(mid)

    def evidence(self, mid: str, step: StepResult) -> Evidence:
        """What is known of the level running now (see the module docstring)."""
        stall = self.wedged.get(mid)
        warm = self.warmups.get(mid)
        target = self.core.target(mid)
        slo_miss = ""
        if self.slo is not None and target is not None:
            flag = slo_flag(self.slo, target.total)
            if flag.meets is False:
                slo_miss = f"SLO {self.slo.text}: {flag.why}"
        queue = self.accept_queue(mid)
        if queue is not None and step.accept_queue is None:
            step = dataclasses.replace(step, accept_queue=queue)
        return Evidence(
            step=step,
            others=self.levels.others(mid),
            rate_mode=self.levels.rate_mode(mid),
            recent=_added(self.recent.get(mid)),
            stalled_s=stall.seconds if stall is not None else 0.0,
            stall_why=stall.detail() if stall is not None else "",
            warming=warm is not None and warm.warming,
            warm_climb=warm.climb() if warm is not None else None,
            slo_miss=slo_miss,
            cpu_pending=self.cpu_pending(mid),
        )

    def judgment(self, mid: str, now: float, started_at: float) -> tuple[Judgment | None, float]:
        """The level running now, judged, and since when (race seconds) its state has
        held; (None, 0) before the level has any figure."""
        step = self.levels.current_step(mid)
        if step is None:
            return None, 0.0
        fresh = judge(self.evidence(mid, step))
        shown, since = self.held.setdefault(mid, JudgmentHold()).feed(now, fresh)
        m = self.core.members.get(mid)
        target = self.core.target(mid)
        note = wedge.backlog_note(m.signs if m else None, target.interval if target else None)
        if note and shown.state in BROKEN:
            shown = dataclasses.replace(shown, why=f"{shown.why} · {note}")
        return shown, since - started_at


def _added(recent: deque[tuple[int, WindowStats]] | None) -> WindowStats | None:
    """The recent intervals as one window of counts (what ended, and how)."""
    if not recent:
        return None
    out = WindowStats()
    for _level, w in recent:
        out.seconds += w.seconds
        out.requests += w.requests
        out.ok += w.ok
        for k, n in w.failures.items():
            out.failures[k] = out.failures.get(k, 0) + n
        for code, n in w.status.items():
            out.status[code] = out.status.get(code, 0) + n
    return out
