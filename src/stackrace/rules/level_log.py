"""Load levels: the ladder, the log of what each level measured, and the ramp.

- `LEVELS`: the slider's and the ramp's levels, roughly 1-2-5 per decade.
- `LevelLog`: turns a stream of `EngineSnapshot`s into `StepResult`s per target, one per
  level, from the running totals (the driver resets them when the level changes), with
  each level's fastest answer (from its first interval on, its warm-up included) and
  whether the engine limited it; the rules (stackrace.rules.level) judge them.
- `Ramp`: a clock-driven controller that says which level to set next.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from stackrace.engine.model import EngineSnapshot, TargetSnapshot, WindowStats
from stackrace.rules.breaking import CpuShare, LevelVerdict, StepResult, step_result
from stackrace.rules.engine import engine_limit
from stackrace.rules.level import breaking_point

# The slider's and the ramp's levels: roughly 1-2-5 per decade, as a log scale wants.
LEVELS: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)


@dataclass
class _Current:
    level: int
    window: WindowStats | None = None
    rate: bool = False  # the level is a rate (req/s), not connections
    fastest_us: int | None = None  # its fastest answer, from its first interval on
    intervals: int = 0
    saturated: int = 0  # intervals in which an engine process of it ran near 100 %
    procs: int = 1

    def see(self, t: TargetSnapshot) -> None:
        """One more snapshot of the level: its totals, and what its interval adds."""
        self.window = t.total
        self.procs = t.procs
        self.intervals += 1
        self.saturated += bool(t.saturated)
        for w in (t.interval, t.total):
            if w.latency.count and (self.fastest_us is None or w.latency.min < self.fastest_us):
                self.fastest_us = w.latency.min

    @property
    def engine_limit(self) -> str:
        """Why the engine limited the level ("" it did not): saturated in most of its
        intervals, or by the totals' own figures (stackrace.rules.engine)."""
        if self.window is None:
            return ""
        return engine_limit(self.window, 2 * self.saturated > self.intervals, self.procs)


# A target id's CpuShare (the driver knows the stacks' processes and cores).
CpuOf = Callable[[str], CpuShare]
# A target's level as the race counts it (the driver knows its protocol): the requests
# in flight it was asked, which for an h2 target is its connections × streams
LevelOf = Callable[[TargetSnapshot], int]


@dataclass
class LevelLog:
    """Per target, one StepResult per level, fed by every snapshot.

    The driver resets the engine's running totals whenever it changes the level, so the
    totals in the last snapshot at a level are that level's figures. A level visited twice
    keeps its latest measurement.
    """

    steps: dict[str, dict[int, StepResult]] = field(default_factory=dict)
    _current: dict[str, _Current] = field(default_factory=dict)
    cpu_of: CpuOf | None = None
    # None: the engine's own `TargetSnapshot.level` (connections, or req/s)
    level_of: LevelOf | None = None
    # levels running when the log was cleared: their totals started before the clear,
    # so they are not recorded until the level changes. Keyed with the mode too: 100
    # connections and 100 req/s are different levels (a switch of mode clears the log)
    _ignored: dict[str, tuple[int, bool]] = field(default_factory=dict)

    def feed(self, snap: EngineSnapshot) -> None:
        for t in snap.targets:
            level = self.level_of(t) if self.level_of is not None else t.level
            if self._ignored.get(t.id) == (level, bool(t.rate)):
                continue
            self._ignored.pop(t.id, None)
            cur = self._current.get(t.id)
            if cur is None or cur.level != level or cur.rate != bool(t.rate):
                if cur is not None:
                    self._commit(t.id, cur)
                cur = self._current[t.id] = _Current(level, rate=bool(t.rate))
            cur.see(t)

    def _step(self, target_id: str, cur: _Current) -> StepResult | None:
        if cur.window is None:
            return None
        share = self.cpu_of(target_id) if self.cpu_of else None
        return step_result(
            cur.level,
            cur.window,
            share=share,
            fastest_us=cur.fastest_us,
            engine_limit=cur.engine_limit,
        )

    def _commit(self, target_id: str, cur: _Current) -> None:
        step = self._step(target_id, cur)
        if step is not None and step.enough:
            self.steps.setdefault(target_id, {})[cur.level] = step

    def current_step(self, target_id: str) -> StepResult | None:
        """The level running now, this visit only (None before any figure)."""
        cur = self._current.get(target_id)
        return self._step(target_id, cur) if cur is not None else None

    def current_level(self, target_id: str) -> int | None:
        cur = self._current.get(target_id)
        return cur.level if cur is not None else None

    def rate_mode(self, target_id: str) -> bool:
        cur = self._current.get(target_id)
        return cur.rate if cur is not None else False

    def results(self, target_id: str) -> list[StepResult]:
        """Finished levels plus the one running now (when it has enough data)."""
        done = dict(self.steps.get(target_id, {}))
        cur = self._current.get(target_id)
        if cur is not None:
            live = self._step(target_id, cur)
            if live is not None and live.enough:
                done[cur.level] = live
        return [done[k] for k in sorted(done)]

    def others(self, target_id: str) -> list[StepResult]:
        """The levels measured before this visit of the running one (its own earlier
        visit too): evidence for judging it (their fastest answers)."""
        return list(self.steps.get(target_id, {}).values())

    def breaking_point(self, target_id: str) -> LevelVerdict | None:
        return breaking_point(self.results(target_id), self.rate_mode(target_id))

    def counting_again(self) -> None:
        """The driver has reset every target's totals since the last clear: the level
        running now may be recorded (a ramp whose first level is the one running)."""
        self._ignored.clear()

    def clear(self) -> None:
        """Forget every level; the ones running now are not recorded either."""
        self._ignored = {tid: (cur.level, cur.rate) for tid, cur in self._current.items()}
        self.steps.clear()
        self._current.clear()


@dataclass
class Ramp:
    """Steps the load up through `levels`, `dwell` seconds each.

    `advance(now, all_broken)` returns the level to set now, or None to leave it; once the
    last level has dwelt (or every stack has broken) `done` is True and `advance` returns
    `restore`, the level to go back to.
    """

    levels: Sequence[int]
    dwell: float = 3.0
    restore: int | None = None
    started_at: float | None = None
    index: int = -1
    done: bool = False

    @classmethod
    def from_level(
        cls, start: int, top: int = 2000, dwell: float = 3.0, restore: int | None = None
    ) -> Ramp:
        """The LEVELS from `start` (at least 1) to `top` inclusive."""
        levels = [n for n in LEVELS if start <= n <= top] or [top]
        return cls(levels=levels, dwell=dwell, restore=restore)

    @property
    def level(self) -> int | None:
        return self.levels[self.index] if 0 <= self.index < len(self.levels) else None

    def progress(self) -> str:
        return f"{self.index + 1}/{len(self.levels)}"

    def advance(self, now: float, all_broken: bool = False) -> int | None:
        if self.done:
            return None
        if self.started_at is None:
            self.started_at = now
            self.index = 0
            return self.levels[0]
        due = int((now - self.started_at) // self.dwell)
        if due <= self.index:
            return None
        if due >= len(self.levels) or all_broken:
            self.done = True
            return self.restore
        self.index = due
        return self.levels[due]
