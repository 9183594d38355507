"""Load levels, the breaking-point rule and the ramp that steps through levels.

Pure logic, no UI and no I/O, so the TUI and the headless bench share it:

- `StepResult`: what one stack did at one load level (concurrency, or req/s in rate mode).
- `find_breaking_point(steps)`: the first level where the stack broke, and why.
- `LevelLog`: turns a stream of `EngineSnapshot`s into `StepResult`s per target, one per
  level, from the running totals (the driver resets them when the level changes).
- `Ramp`: a clock-driven controller that says which level to set next.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from stackrace.engine.model import HTTP_STATUS, INVALID_BODY, EngineSnapshot, WindowStats

# The slider's and the ramp's levels: roughly 1-2-5 per decade, as a log scale wants.
LEVELS: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)

FAILURE_RATIO = 0.01  # broken when more than 1% of attempts fail
P99_FACTOR = 10.0  # broken when p99 exceeds 10x its low-load value
GROWTH_MIN = 1.05  # QPS "stops growing" below +5% from the previous level
LATENCY_GROWTH = 1.10  # ... while mean latency grows by more than 10%
MIN_SECONDS = 1.0  # a level needs this much measured time to count
MIN_ATTEMPTS = 20  # and this many requests (a level at c=1 on a slow stack still counts)

# Failures that arrive as complete responses are already in `requests`.
_RESPONSE_FAILURES = frozenset({HTTP_STATUS, INVALID_BODY})


@dataclass(frozen=True)
class StepResult:
    """One stack at one load level, measured over `seconds`."""

    level: int
    seconds: float
    requests: int
    attempts: int  # requests plus failures that never got a response
    failed: int
    rps: float
    mean_us: float
    p50_us: int
    p99_us: int
    max_us: int

    @property
    def failure_ratio(self) -> float:
        return self.failed / self.attempts if self.attempts else 0.0

    @property
    def enough(self) -> bool:
        """Whether the level was measured long enough to judge."""
        return self.seconds >= MIN_SECONDS and self.attempts >= MIN_ATTEMPTS


def attempts(window: WindowStats) -> int:
    """Requests that ended one way or another: responses plus failures that got none."""
    no_response = sum(n for k, n in window.failures.items() if k not in _RESPONSE_FAILURES)
    return window.requests + no_response


def step_result(level: int, window: WindowStats) -> StepResult:
    """A StepResult from a window of engine figures (the running totals at one level)."""
    lat = window.latency
    return StepResult(
        level=level,
        seconds=window.seconds,
        requests=window.requests,
        attempts=attempts(window),
        failed=window.failed,
        rps=window.rps,
        mean_us=lat.mean,
        p50_us=lat.p50,
        p99_us=lat.p99,
        max_us=lat.max,
    )


@dataclass(frozen=True)
class BreakingPoint:
    level: int
    reason: str  # short, for a pane: "2.3% failed", "p99 ×14", "QPS flat"
    p99_us: int
    rps: float


def breaking_reason(step: StepResult, previous: StepResult | None, low_p99: int) -> str | None:
    """Why `step` counts as broken, or None. `low_p99` is the p99 at the lowest level."""
    if step.failure_ratio > FAILURE_RATIO:
        return f"{100 * step.failure_ratio:.1f}% failed"
    if low_p99 > 0 and step.p99_us > P99_FACTOR * low_p99:
        return f"p99 ×{step.p99_us / low_p99:.0f}"
    if (
        previous is not None
        and previous.rps > 0
        and step.rps < previous.rps * GROWTH_MIN
        and previous.mean_us > 0
        and step.mean_us > previous.mean_us * LATENCY_GROWTH
    ):
        return "QPS flat"
    return None


def find_breaking_point(steps: Sequence[StepResult]) -> BreakingPoint | None:
    """The first level (ascending) where the rule says the stack broke."""
    judged = sorted((s for s in steps if s.enough), key=lambda s: s.level)
    if not judged:
        return None
    low_p99 = judged[0].p99_us
    previous: StepResult | None = None
    for step in judged:
        reason = breaking_reason(step, previous, low_p99)
        if reason is not None:
            return BreakingPoint(step.level, reason, step.p99_us, step.rps)
        previous = step
    return None


def peak(steps: Sequence[StepResult]) -> StepResult | None:
    """The level with the highest QPS."""
    judged = [s for s in steps if s.enough]
    return max(judged, key=lambda s: s.rps) if judged else None


@dataclass
class _Current:
    level: int
    window: WindowStats | None = None


@dataclass
class LevelLog:
    """Per target, one StepResult per level, fed by every snapshot.

    The driver resets the engine's running totals whenever it changes the level, so the
    totals in the last snapshot at a level are that level's figures. A level visited twice
    keeps its latest measurement.
    """

    steps: dict[str, dict[int, StepResult]] = field(default_factory=dict)
    _current: dict[str, _Current] = field(default_factory=dict)

    def feed(self, snap: EngineSnapshot) -> None:
        for t in snap.targets:
            level = round(t.rate) if t.rate else t.concurrency
            cur = self._current.get(t.id)
            if cur is None or cur.level != level:
                if cur is not None:
                    self._commit(t.id, cur)
                cur = self._current[t.id] = _Current(level)
            cur.window = t.total

    def _commit(self, target_id: str, cur: _Current) -> None:
        if cur.window is None:
            return
        step = step_result(cur.level, cur.window)
        if step.enough:
            self.steps.setdefault(target_id, {})[cur.level] = step

    def results(self, target_id: str) -> list[StepResult]:
        """Finished levels plus the one running now (when it has enough data)."""
        done = dict(self.steps.get(target_id, {}))
        cur = self._current.get(target_id)
        if cur is not None and cur.window is not None:
            live = step_result(cur.level, cur.window)
            if live.enough:
                done[cur.level] = live
        return [done[k] for k in sorted(done)]

    def breaking_point(self, target_id: str) -> BreakingPoint | None:
        return find_breaking_point(self.results(target_id))

    def clear(self) -> None:
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
