"""A stack's CPU in a verdict: its own limit, or a core it waited for.

- **CPU-bound** (`cpu_bound`): the stack used `CPU_BOUND` of the CPU it can use (its
  cores, one per process at most). Requests that queue then queue behind its own CPU:
  it serves as fast as its cores allow (the level's state is *saturated*).
- **Held back by a busy core** (`core_limited`): it used less, but what it used plus
  what it waited for a core reaches that share, and the wait was the core's doing: it
  waited `SHARED_WAIT` of its capacity on cores it shares with other stacks that were
  full (`SharedCore.full`), or `CORE_WAIT` of it anyway (another process on the
  machine — a build, a browser, a CPU burner — took the core). Its figures are then a
  share of a core, not its capacity: no breaking point, and no tick, at that level. A
  stack that filled the shared core itself and hardly waited (uvicorn at 79 % of it,
  waiting 6 %) is its own verdict, not the core's.
- **The shared cores** (`SharedCore`): when stacks share cores (two cores: the engines
  get one, the stacks share the other), each gets a share and waits the rest; judged
  one by one every pane would read "uvicorn broke" when what happened is that the core
  was full. The race says so once, in words a room reads, naming what filled it ("the 4
  stacks share one core, full: they ran 63% of it, other programs took the rest:
  figures compare shares"), never as summed waits (four stacks waiting on one core
  add up to "waited 573 %").
- **The share it got** (`share_got`): of the time it wanted a core, the share it ran.
  A queue is scaled by the time it lost (`time_lost`) before it is called the core's
  (rules/level.py): a server that got its core 40 % of the time it wanted one serves
  at most at 40 % of its speed, so its requests wait up to 1 / 0.4 times as long; a
  queue beyond that is its own, and so is one the server's own evidence shows (its
  accept queue holding the clients: every worker busy).
"""

from __future__ import annotations

from dataclasses import dataclass

from stackrace.rules.breaking import StepResult

CPU_BOUND = 0.80  # CPU-bound when a stack uses this share of the CPU it can use
CORE_WAIT = 0.25  # a core held by others when a stack waits for it this share of its capacity
SHARED_WAIT = 0.10  # ... and this much on cores it shares with other stacks that were full
SHARED_FULL = 0.85  # the shared cores are full when the stacks use this share of them,
WAITED_FULL = 0.25  # ... or when they want more than the cores give and wait this much
SHARE_WAIT = 0.10  # a wait for a core worth saying beside a verdict (busy_too): of capacity


def capacity(step: StepResult) -> float:
    """The most CPU the stack can use, % of one core (one core when not known)."""
    return step.cpu_capacity or 100.0


def cpu_bound(step: StepResult) -> bool:
    """The stack itself used nearly all the CPU it can use."""
    if step.cpu_percent is None:
        return False
    return step.cpu_percent >= CPU_BOUND * capacity(step)


def core_limited(step: StepResult) -> bool:
    """Not CPU-bound by itself, but what it used plus its wait for a core reaches what
    it can use, and the core was busy with others: full shared cores, or a wait of
    `CORE_WAIT` of its capacity (another process on the machine)."""
    if step.cpu_percent is None or cpu_bound(step):
        return False
    cap = capacity(step)
    waited = step.cpu_wait_percent or 0.0
    if step.cpu_percent + waited < CPU_BOUND * cap:
        return False
    return waited >= (SHARED_WAIT if step.core_full else CORE_WAIT) * cap


def core_share(step: StepResult) -> str:
    """ "" unless the stack was held back by a busy core at this level: then its share
    of that core and its wait, the fair figures there."""
    if not core_limited(step):
        return ""
    cap = capacity(step) / 100
    cores = "its core" if cap <= 1 else f"its {cap:.0f} cores"
    shared = "shared and full" if step.core_full else "busy with other work"
    used, waited = step.cpu_percent or 0.0, step.cpu_wait_percent or 0.0
    # shares a room reads, never above 100 % (several processes waiting at once add up
    # to more than one core): of its cores, what it ran; of the time it wanted them,
    # how much it spent waiting
    ran = min(100.0, used / max(1.0, cap))
    wanted = 100.0 * waited / (used + waited) if used + waited > 0 else 0.0
    them = "it" if cap <= 1 else "them"
    waits = f"waited {wanted:.0f}% of the time it wanted {them}"
    return f"{cores} {shared}: it ran {ran:.0f}%, and {waits}"


def share_got(step: StepResult) -> float | None:
    """Of the time the stack wanted a core (it ran, or it was runnable and waited), the
    share it got one (0-1), when it waited `SHARE_WAIT` of its capacity or more and its
    own CPU was not the limit; None otherwise (too little wait to scale anything by)."""
    if step.cpu_percent is None or cpu_bound(step):
        return None
    waited = step.cpu_wait_percent or 0.0
    if waited < SHARE_WAIT * capacity(step):
        return None
    wanted = step.cpu_percent + waited
    return step.cpu_percent / wanted if wanted > 0 else None


def time_lost(step: StepResult) -> float | None:
    """What its waits would be with a core to itself, as a factor (0-1): 1 less the
    share of its serving time it spent runnable without a core (Little's law: with N
    clients, R = N / X, and X rises by 1 / (1 - f) when the wait f is given back).
    For a stack that wanted its core the whole time this is the share it got; for one that
    mostly sleeps in I/O it is near 1: one sync worker on 10 ms waits that ran 5 % and
    waited 12 % got its core 29 % of the time it wanted one, yet lost only 12 % of its
    time, and its 115 ms queue at c=10 is its own (scaled by 0.29 it read as the core's,
    and the one sync worker of a test beside other work was never judged broken).
    A stack that wanted its core(s) nearly all the time (ran or waited 80 % of them or
    more) is held to the share it got, the smaller: its speed is that share, and a
    recorded uvicorn beside a starved engine (ran 20 %, waited 75 %) stays the core's.

    Any wait scales, however small (1.0 when it never waited): a threshold below which
    nothing is scaled made the state flip on a small difference — a wait of 9 % of its
    capacity judged the raw queue, one of 11 % a queue scaled and held to a margin —
    so two stacks that waited nearly alike could read QUEUEING and not judged side by
    side (issue 47). None when its CPU is not known, or was the limit itself."""
    if step.cpu_percent is None or cpu_bound(step):
        return None
    used = step.cpu_percent
    waited = step.cpu_wait_percent or 0.0
    wanted = used + waited
    if wanted <= 0 or waited <= 0:
        return 1.0
    got = used / wanted
    if wanted >= 0.8 * capacity(step):
        return got
    return max(got, 1.0 - min(1.0, waited / capacity(step)))


def busy_too(step: StepResult) -> str:
    """The busy core said beside a verdict that is the server's all the same: "its core
    was also busy: it ran 40 % of the time it wanted it" ("" when it hardly waited)."""
    got = share_got(step)
    if got is None:
        return ""
    them = "it" if capacity(step) <= 100 else "them"
    return f"its core was also busy: it ran {100 * got:.0f}% of the time it wanted {them}"


def alone_on_a_core(cpu_us_per_request: float | None, cores: float = 1.0) -> float | None:
    """What a stack would serve alone on `cores` cores, from its own CPU per request
    (an upper bound: it leaves out everything but the stack's own CPU)."""
    if not cpu_us_per_request or cpu_us_per_request <= 0:
        return None
    return cores * 1e6 / cpu_us_per_request


@dataclass(frozen=True)
class SharedCore:
    """The cores several stacks share, and whether they were full."""

    cores: int
    used: float  # % of one core, every stack on them together
    waited: float  # % of one core, their time waiting for one of them
    stacks: int

    @property
    def full(self) -> bool:
        """Used up by the stacks, or wanted by them beyond what it gives (their CPU and
        their wait for it past the cores' capacity: other processes on the machine
        take a share too)."""
        cap = 100.0 * self.cores
        if self.stacks < 2:
            return False
        return self.used >= SHARED_FULL * cap or (
            self.used + self.waited >= cap and self.waited >= WAITED_FULL * cap
        )

    def headline(self) -> str:
        """The race's verdict, for the header, in words, naming what filled the cores:
        the stacks' own work, or other programs beside it (their CPU added to 63 % of
        one core while they waited for it). One share of the cores, never summed waits
        ("waited 573 %")."""
        where = "one core" if self.cores == 1 else f"{self.cores} cores"
        it = "it" if self.cores == 1 else "them"
        ran = min(100.0, self.used / self.cores)
        if self.used >= SHARED_FULL * 100.0 * self.cores:
            filled = f"full of their own work (they ran {ran:.0f}% of {it})"
        else:
            filled = f"full: they ran {ran:.0f}% of {it}, other programs took the rest"
        return f"the {self.stacks} stacks share {where}, {filled}: figures compare shares"


def shared_core(cpu: list[tuple[float, float]], cores: int) -> SharedCore:
    """The shared cores' state from each stack's (CPU used, CPU waited for), % of a core."""
    return SharedCore(
        cores=max(1, cores),
        used=sum(u for u, _w in cpu),
        waited=sum(w for _u, w in cpu),
        stacks=len(cpu),
    )
