"""Load levels, the breaking-point rule and the ramp that steps through levels.

Pure logic, no UI and no I/O, so the app and the headless bench share it:

- `StepResult`: what one stack did at one load level (concurrency, or req/s in rate mode).
- `judge(step, previous, low_p99)`: whether that level broke the stack, as a `Verdict` of
  one of three kinds that mean different things:
    * **failing**: more than 1 % of attempts failed — refused, reset, timed out, an HTTP
      error: clients get errors, not answers;
    * **queueing**: clients wait: more than 1 % of them are still waiting after longer
      than the level itself has lasted (`stale`: queued behind a server that cannot serve
      them in time; the queue counts, not just what came back), or req/s stopped growing
      (< +5 %) while mean latency grew (> +10 %), or p99 passed 10× its low-load value —
      and the stack's CPU is not the limit (a sync worker blocked on I/O). A request
      still waiting has not failed: it fails if the timeout ends it, and then the level
      is failing;
    * **saturated**: the same signs with the stack's CPU at ≥ 80 % of what it can use:
      it is CPU-bound, serving as fast as its cores allow.
  On cores shared by several stacks, a stack that used less than that but waited for
  the full shared core the rest of the time (`core_full`, `core_starved`) has no
  verdict of its own: the race's verdict is that the shared core is full, and its
  figures are a share of that core, not its capacity (race/verdicts.py).
  `abandoned` requests (the engine gave up on them when the load changed) never count.
- `find_breaking_point(steps)`: the first level (ascending) with a verdict.
- `LevelLog`: turns a stream of `EngineSnapshot`s into `StepResult`s per target, one per
  level, from the running totals (the driver resets them when the level changes).
- `Ramp`: a clock-driven controller that says which level to set next.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from stackrace.engine.model import ABANDONED, RESPONSE_FAILURES, EngineSnapshot, WindowStats

# The slider's and the ramp's levels: roughly 1-2-5 per decade, as a log scale wants.
LEVELS: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)

FAILURE_RATIO = 0.01  # failing when more than 1% of attempts fail or wait too long
P99_FACTOR = 10.0  # broken when p99 exceeds 10x its low-load value
GROWTH_MIN = 1.05  # QPS "stops growing" below +5% from the previous level
LATENCY_GROWTH = 1.10  # ... while mean latency grows by more than 10%
CPU_BOUND = 0.80  # saturated when the stack uses this share of the CPU it can use
MIN_SECONDS = 1.0  # a level needs this much measured time to count
MIN_ATTEMPTS = 20  # and this many requests (a level at c=1 on a slow stack still counts)

FAILING = "failing"
QUEUEING = "queueing"
SATURATED = "saturated"
VERDICT_KINDS = (FAILING, QUEUEING, SATURATED)


@dataclass(frozen=True)
class StepResult:
    """One stack at one load level, measured over `window` (the level's totals)."""

    level: int
    window: WindowStats
    cpu_percent: float | None = None  # the stack's CPU, percent of one core
    cpu_capacity: float | None = None  # percent it can use at most (100 × usable cores)
    cpu_wait_percent: float | None = None  # runnable, waiting for a core, % of one core
    core_full: bool = False  # it shares cores with other stacks, and they were full

    @property
    def seconds(self) -> float:
        return self.window.seconds

    @property
    def requests(self) -> int:
        return self.window.requests

    @property
    def rps(self) -> float:
        return self.window.rps

    @property
    def mean_us(self) -> float:
        return self.window.latency.mean

    @property
    def p50_us(self) -> int:
        return self.window.latency.p50

    @property
    def p99_us(self) -> int:
        return self.window.latency.p99

    @property
    def max_us(self) -> int:
        return self.window.latency.max

    @property
    def stale(self) -> int:
        """Clients still waiting after longer than the level has lasted."""
        return self.window.stale

    @property
    def failed(self) -> int:
        """Failures the server answers for, plus the stale waiting requests."""
        w = self.window
        return sum(n for k, n in w.failures.items() if k != ABANDONED) + w.stale

    @property
    def errors(self) -> int:
        """Failures the server answers for, without the stale waiting requests."""
        return self.failed - self.window.stale

    @property
    def attempts(self) -> int:
        return attempts(self.window) + self.window.stale

    @property
    def failure_ratio(self) -> float:
        return self.failed / self.attempts if self.attempts else 0.0

    @property
    def enough(self) -> bool:
        """Whether the level was measured long enough to judge."""
        return self.seconds >= MIN_SECONDS and self.attempts >= MIN_ATTEMPTS

    @property
    def cpu_bound(self) -> bool:
        """The stack itself used nearly all the CPU it can use."""
        if self.cpu_percent is None:
            return False
        return self.cpu_percent >= CPU_BOUND * (self.cpu_capacity or 100.0)

    @property
    def core_starved(self) -> bool:
        """Not CPU-bound by itself, but waiting for a shared core that was full: what
        it used plus what it waited for reaches its capacity."""
        if not self.core_full or self.cpu_percent is None:
            return False
        demand = self.cpu_percent + (self.cpu_wait_percent or 0.0)
        return demand >= CPU_BOUND * (self.cpu_capacity or 100.0)


def attempts(window: WindowStats) -> int:
    """Requests that ended one way or another: responses plus failures that got none
    (`abandoned` ones excluded: the engine ended those, not the server)."""
    no_response = sum(
        n for k, n in window.failures.items() if k not in RESPONSE_FAILURES and k != ABANDONED
    )
    return window.requests + no_response


def step_result(
    level: int,
    window: WindowStats,
    cpu_percent: float | None = None,
    cpu_capacity: float | None = None,
    share: CpuShare | None = None,
) -> StepResult:
    if share is not None:
        return StepResult(level, window, share.used, share.capacity, share.waited, share.core_full)
    return StepResult(level, window, cpu_percent, cpu_capacity)


@dataclass(frozen=True)
class Verdict:
    """Why a level counts as broken: its kind and the figure that proves it."""

    level: int
    kind: str  # FAILING, QUEUEING or SATURATED
    reason: str  # short, for a pane: "2.3% failed", "QPS flat, latency ×9.8"
    p99_us: int
    rps: float


BreakingPoint = Verdict  # the first verdict of a ramp or a bench run


def judge(step: StepResult, previous: StepResult | None, low_p99: int) -> Verdict | None:
    """The verdict for `step`, or None. `low_p99` is the p99 at the lowest level."""

    def verdict(kind: str, reason: str) -> Verdict:
        return Verdict(step.level, kind, reason, step.p99_us, step.rps)

    if step.attempts and step.errors / step.attempts > FAILURE_RATIO:
        return verdict(FAILING, f"{100 * step.errors / step.attempts:.1f}% failed")
    stale = step.attempts > 0 and step.stale / step.attempts > FAILURE_RATIO
    flat = (
        previous is not None
        and previous.rps > 0
        and step.rps < previous.rps * GROWTH_MIN
        and previous.mean_us > 0
        and step.mean_us > previous.mean_us * LATENCY_GROWTH
    )
    slow = low_p99 > 0 and step.p99_us > P99_FACTOR * low_p99
    if not (flat or slow or stale):
        return None
    if stale:
        what = f"{step.stale:,} waited > {step.seconds:.0f}s with no answer"
    elif flat and previous is not None:
        what = f"QPS flat, latency ×{step.mean_us / previous.mean_us:.1f}"
    else:
        what = f"p99 ×{step.p99_us / low_p99:.0f}"
    if step.cpu_bound:
        return verdict(SATURATED, f"CPU-bound ({step.cpu_percent:.0f}% CPU), {what}")
    if step.core_starved:
        return None  # the shared core is full: the race's verdict, not this stack's
    return verdict(QUEUEING, what)


def breaking_reason(step: StepResult, previous: StepResult | None, low_p99: int) -> str | None:
    v = judge(step, previous, low_p99)
    return v.reason if v is not None else None


def find_breaking_point(steps: Sequence[StepResult]) -> Verdict | None:
    """The first level (ascending) where the rule says the stack broke."""
    judged = sorted((s for s in steps if s.enough), key=lambda s: s.level)
    if not judged:
        return None
    low_p99 = judged[0].p99_us
    previous: StepResult | None = None
    for step in judged:
        v = judge(step, previous, low_p99)
        if v is not None:
            return v
        previous = step
    return None


def current_verdict(steps: Sequence[StepResult], level: int) -> Verdict | None:
    """The verdict for the level being measured now (against the levels below it)."""
    judged = sorted((s for s in steps if s.enough), key=lambda s: s.level)
    now = next((s for s in judged if s.level == level), None)
    if now is None:
        return None
    below = [s for s in judged if s.level < level]
    low_p99 = (below[0] if below else now).p99_us
    return judge(now, below[-1] if below else None, low_p99)


def peak(steps: Sequence[StepResult]) -> StepResult | None:
    """The level with the highest QPS."""
    judged = [s for s in steps if s.enough]
    return max(judged, key=lambda s: s.rps) if judged else None


@dataclass
class _Current:
    level: int
    window: WindowStats | None = None
    rate: bool = False  # the level is a rate (req/s), not connections


@dataclass(frozen=True)
class CpuShare:
    """A stack's CPU for the verdict, % of one core: what it used, what it can use at
    most, how long it waited for a core, and whether it shares cores that were full."""

    used: float | None = None
    capacity: float | None = None
    waited: float | None = None
    core_full: bool = False


# A target id's CpuShare (the driver knows the stacks' processes and cores).
CpuOf = Callable[[str], CpuShare]


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
    # levels running when the log was cleared: their totals started before the clear,
    # so they are not recorded until the level changes. Keyed with the mode too: 100
    # connections and 100 req/s are different levels (a switch of mode clears the log)
    _ignored: dict[str, tuple[int, bool]] = field(default_factory=dict)

    def feed(self, snap: EngineSnapshot) -> None:
        for t in snap.targets:
            level = t.level
            if self._ignored.get(t.id) == (level, bool(t.rate)):
                continue
            self._ignored.pop(t.id, None)
            cur = self._current.get(t.id)
            if cur is None or cur.level != level or cur.rate != bool(t.rate):
                if cur is not None:
                    self._commit(t.id, cur)
                cur = self._current[t.id] = _Current(level, rate=bool(t.rate))
            cur.window = t.total

    def _step(self, target_id: str, cur: _Current) -> StepResult | None:
        if cur.window is None:
            return None
        share = self.cpu_of(target_id) if self.cpu_of else None
        return step_result(cur.level, cur.window, share=share)

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

    def results(self, target_id: str) -> list[StepResult]:
        """Finished levels plus the one running now (when it has enough data)."""
        done = dict(self.steps.get(target_id, {}))
        cur = self._current.get(target_id)
        if cur is not None:
            live = self._step(target_id, cur)
            if live is not None and live.enough:
                done[cur.level] = live
        return [done[k] for k in sorted(done)]

    def breaking_point(self, target_id: str) -> Verdict | None:
        return find_breaking_point(self.results(target_id))

    def verdict_now(self, target_id: str) -> Verdict | None:
        level = self.current_level(target_id)
        if level is None:
            return None
        return current_verdict(self.results(target_id), level)

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
