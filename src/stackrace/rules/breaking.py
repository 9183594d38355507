"""What one stack did at one load level: the evidence every judgment reads.

Pure data, no UI and no I/O:

- `StepResult`: one stack at one load level (concurrency, or req/s in rate mode): its
  window (the level's running totals: answered, failed by kind, waiting, latency,
  in flight), its CPU (used, what it can use, its wait for a core, whether the cores
  it shares with other stacks were full), its fastest answer at the level (warm-up
  included: the service time's estimate) and whether the engine limited its figures;
  with the counts derived from them (`attempts`, `failed`, `stale`, `enough`);
- `LevelVerdict`: a level where the stack broke, its kind and the figure that proves it;
- `CpuShare`: a stack's CPU as the driver knows it.

How a level is judged — keeping up, queueing, failing, limited by the engine … — and
where a stack broke are the rules' (stackrace.rules.level): one judgment for the app,
a replay, bench and every summary. `abandoned` requests (the engine gave up on them
when the load changed) never count against a server.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from stackrace.engine.model import NOT_THE_SERVERS, RESPONSE_FAILURES, WindowStats

MIN_SECONDS = 1.0  # a level needs this much measured time to count
MIN_ATTEMPTS = 20  # and this many requests (a level at c=1 on a slow stack still counts)


@dataclass(frozen=True)
class StepResult:
    """One stack at one load level, measured over `window` (the level's totals)."""

    level: int
    window: WindowStats
    cpu_percent: float | None = None  # the stack's CPU, percent of one core
    cpu_capacity: float | None = None  # percent it can use at most (100 × usable cores)
    cpu_wait_percent: float | None = None  # runnable, waiting for a core, % of one core
    core_full: bool = False  # it shares cores with other stacks, and they were full
    # its fastest answer at the level, from its first intervals on (the level's warm-up
    # included: a level started from idle answers its first request at once), µs
    fastest_us: int | None = None
    engine_limit: str = ""  # why the engine limited its figures ("" it did not)
    # connections its listening socket's accept queue held (the kernel's: handshakes
    # done, no worker has taken them yet), the most seen at the level; None: not looked
    # at. The server's own evidence that every worker was busy (rules/level.py)
    accept_queue: int | None = None

    @property
    def seconds(self) -> float:
        return self.window.seconds

    @property
    def requests(self) -> int:
        return self.window.requests

    @property
    def rps(self) -> float:
        """Answers that count, a second (goodput: an HTTP error is no throughput)."""
        return self.window.goodput

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
    def failed(self) -> int:
        """Failures the server answers for, plus the stale waiting requests."""
        w = self.window
        return sum(n for k, n in w.failures.items() if k not in NOT_THE_SERVERS) + w.stale

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


def attempts(window: WindowStats) -> int:
    """Requests that ended one way or another: responses plus failures that got none
    (`abandoned` ones excluded: the engine ended those, not the server)."""
    no_response = sum(
        n
        for k, n in window.failures.items()
        if k not in RESPONSE_FAILURES and k not in NOT_THE_SERVERS
    )
    return window.requests + no_response


def step_result(
    level: int,
    window: WindowStats,
    cpu_percent: float | None = None,
    cpu_capacity: float | None = None,
    share: CpuShare | None = None,
    fastest_us: int | None = None,
    engine_limit: str = "",
    accept_queue: int | None = None,
) -> StepResult:
    if share is not None:
        cpu_percent, cpu_capacity = share.used, share.capacity
        return StepResult(
            level,
            window,
            cpu_percent,
            cpu_capacity,
            share.waited,
            share.core_full,
            fastest_us,
            engine_limit,
            accept_queue,
        )
    return StepResult(
        level,
        window,
        cpu_percent,
        cpu_capacity,
        fastest_us=fastest_us,
        engine_limit=engine_limit,
        accept_queue=accept_queue,
    )


@dataclass(frozen=True)
class LevelVerdict:
    """Why a level counts as broken: its kind (a state of stackrace.rules.level) and
    the figure that proves it; `rps`: its goodput."""

    level: int
    kind: str  # failing, wedged, starving, saturated or queueing
    reason: str  # short, for a pane: "2.3% failed (timed out)", "500 wait ~5.7 s each, …"
    p99_us: int
    rps: float


def peak(steps: Sequence[StepResult]) -> StepResult | None:
    """The level with the most answers that count a second (goodput)."""
    judged = [s for s in steps if s.enough]
    return max(judged, key=lambda s: s.window.goodput) if judged else None


@dataclass(frozen=True)
class CpuShare:
    """A stack's CPU for the verdict, % of one core: what it used, what it can use at
    most, how long it waited for a core, and whether it shares cores that were full."""

    used: float | None = None
    capacity: float | None = None
    waited: float | None = None
    core_full: bool = False
