"""The breaking-point rule: when one load level broke a stack, and why.

Pure logic, no UI and no I/O, so the app and the headless bench judge the same way:

- `StepResult`: what one stack did at one load level (concurrency, or req/s in rate mode).
- `judge(step, previous, low_p99)`: whether that level broke the stack, as a
  `LevelVerdict` of one of four kinds that mean different things:
    * **failing**: more than 1 % of attempts failed — refused, reset, timed out, an HTTP
      error: clients get errors, not answers;
    * **queueing**: clients wait: more than 1 % of them are still waiting after longer
      than the level itself has lasted (`stale`: queued behind a server that cannot serve
      them in time; the queue counts, not just what came back), or req/s stopped growing
      (< +5 %) while mean latency grew (> +10 %), or p99 passed 10× its low-load value —
      and the stack's CPU is not the limit (a sync worker blocked on I/O). A request
      still waiting has not failed: it fails if the timeout ends it, and then the level
      is failing;
    * **starving**: some clients get nothing while the others are served: more than 5 %
      of the clients' time went into waits far longer than the answered requests took
      (engine/model.py `starved_share`: past 10× their p99 and a second, sampled at every
      engine report) — a worker that stays on one keep-alive connection (uWSGI
      with one worker and `--http11-socket` at c=10 answers one client and leaves nine
      to their timeout: under 1 % of the attempts fail), or a server that leaves some
      connections unread while it serves others (node-http at c=1000, CPU-bound: 235 of
      1,000 for the whole level). Counted in time, not attempts: a starved
      client makes one attempt per timeout while a served one makes hundreds;
    * **saturated**: the same signs with the stack's CPU at ≥ 80 % of what it can use:
      it is CPU-bound, serving as fast as its cores allow (a CPU-bound stack that also
      starves clients is saturated, and its reason says it starves them).
  On cores shared by several stacks, a stack that used less than that but waited for
  the full shared core the rest of the time (`core_full`, `core_starved`) has no
  verdict of its own: the race's verdict is that the shared core is full, and its
  figures are a share of that core, not its capacity (race/live/verdicts.py).
  `abandoned` requests (the engine gave up on them when the load changed) never count.
- `find_breaking_point(steps)`: the first level (ascending) with a verdict.

Named for what it holds: the levels themselves and the ramp that steps through them
are stackrace.rules.levels, which feeds this rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from stackrace.engine.model import ABANDONED, RESPONSE_FAILURES, WindowStats

FAILURE_RATIO = 0.01  # failing when more than 1% of attempts fail or wait too long
P99_FACTOR = 10.0  # broken when p99 exceeds 10x its low-load value
GROWTH_MIN = 1.05  # QPS "stops growing" below +5% from the previous level
LATENCY_GROWTH = 1.10  # ... while mean latency grows by more than 10%
CPU_BOUND = 0.80  # saturated when the stack uses this share of the CPU it can use
MIN_SECONDS = 1.0  # a level needs this much measured time to count
MIN_ATTEMPTS = 20  # and this many requests (a level at c=1 on a slow stack still counts)
STARVED_SHARE = 0.05  # starving when one client in twenty gets nothing while others are served

FAILING = "failing"
QUEUEING = "queueing"
SATURATED = "saturated"
STARVING = "starving"
VERDICT_KINDS = (FAILING, STARVING, QUEUEING, SATURATED)


def starves(w: WindowStats) -> bool:
    """Some clients starve while others are answered: more than `STARVED_SHARE` of the
    clients' time spent waiting far past the answered requests' p99."""
    return w.requests > 0 and w.starved_share > STARVED_SHARE


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
    def clients(self) -> int:
        """Clients in play at the level's end: those waiting, or the time-average in
        flight when more (a closed loop's concurrency, an open loop's backlog)."""
        return max(self.window.waiting, round(self.window.in_flight), 1)

    @property
    def starving(self) -> bool:
        """More than `STARVED_SHARE` of the clients' time spent starved."""
        return starves(self.window)

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
        """Whether the level was measured long enough to judge: enough attempts, or
        nothing answered while a client waited longer than the level (a server that
        answers nothing makes one attempt per client; that is the verdict, not too
        little data)."""
        if self.seconds < MIN_SECONDS:
            return False
        return self.attempts >= MIN_ATTEMPTS or (self.requests == 0 and self.stale > 0)

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
class LevelVerdict:
    """Why a level counts as broken: its kind and the figure that proves it."""

    level: int
    kind: str  # FAILING, QUEUEING or SATURATED
    reason: str  # short, for a pane: "2.3% failed", "QPS flat, latency ×9.8"
    p99_us: int
    rps: float


def judge(step: StepResult, previous: StepResult | None, low_p99: int) -> LevelVerdict | None:
    """The verdict for `step`, or None. `low_p99` is the p99 at the lowest level."""

    def verdict(kind: str, reason: str) -> LevelVerdict:
        return LevelVerdict(step.level, kind, reason, step.p99_us, step.rps)

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
    starving = step.starving
    if not (flat or slow or stale or starving):
        return None
    if starving:
        what = starving_reason(step)
    elif stale:
        what = f"{step.stale:,} waited > {step.seconds:.0f}s with no answer"
    elif flat and previous is not None:
        what = f"QPS flat, latency ×{step.mean_us / previous.mean_us:.1f}"
    else:
        what = f"p99 ×{step.p99_us / low_p99:.0f}"
    if step.cpu_bound:
        return verdict(SATURATED, f"CPU-bound ({step.cpu_percent:.0f}% CPU), {what}")
    if starving:
        # unfair service is the stack's own, whatever a shared core did to its speed
        return verdict(STARVING, what)
    if step.core_starved:
        return None  # the shared core is full: the race's verdict, not this stack's
    return verdict(QUEUEING, what)


def starving_reason(step: StepResult) -> str:
    """ "90% of the clients' time without an answer (waits up to 10.0s)", for a pane."""
    share = 100 * step.window.starved_share
    longest = step.window.starved_wait_us / 1e6
    return f"{share:.0f}% of the clients' time without an answer (waits up to {longest:.1f}s)"


def breaking_reason(step: StepResult, previous: StepResult | None, low_p99: int) -> str | None:
    v = judge(step, previous, low_p99)
    return v.reason if v is not None else None


def find_breaking_point(steps: Sequence[StepResult]) -> LevelVerdict | None:
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


def current_verdict(steps: Sequence[StepResult], level: int) -> LevelVerdict | None:
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


@dataclass(frozen=True)
class CpuShare:
    """A stack's CPU for the verdict, % of one core: what it used, what it can use at
    most, how long it waited for a core, and whether it shares cores that were full."""

    used: float | None = None
    capacity: float | None = None
    waited: float | None = None
    core_full: bool = False
