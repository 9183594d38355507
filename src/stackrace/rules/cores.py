"""A stack's CPU in a verdict: its own limit, or a core it waited for.

- **CPU-bound** (`cpu_bound`): the stack used `CPU_BOUND` of the CPU it can use (its
  cores, one per process at most). Requests that queue then queue behind its own CPU:
  it serves as fast as its cores allow (the level's state is *saturated*).
- **Held back by a busy core** (`core_limited`): it used less, but what it used plus
  what it waited for a core reaches that share, and the wait was the core's doing: the
  cores it shares with other stacks were full (`SharedCore.full`), or it waited for a
  core `CORE_WAIT` of its capacity or more (another process on the machine — a build,
  a browser, a CPU burner — took the core). Its figures are then a share of a core,
  not its capacity, and no breaking point is named for it at that level.
- **The shared cores** (`SharedCore`): when stacks share cores (two cores: the engines
  get one, the stacks share the other), each gets a share and waits the rest; judged
  one by one every pane would read "uvicorn broke" when what happened is that the core
  was full. The race says so once, in words a room reads ("the 4 stacks share one
  core, which is full: figures compare shares"), never as summed
  percentages (four stacks waiting on one core add up to "waited 573 %").
"""

from __future__ import annotations

from dataclasses import dataclass

from stackrace.breaking import StepResult

CPU_BOUND = 0.80  # CPU-bound when a stack uses this share of the CPU it can use
CORE_WAIT = 0.25  # a core held by others when a stack waits for it this share of its capacity
SHARED_FULL = 0.85  # the shared cores are full when the stacks use this share of them,
WAITED_FULL = 0.25  # ... or when they want more than the cores give and wait this much


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
    return step.core_full or waited >= CORE_WAIT * cap


def core_share(step: StepResult) -> str:
    """ "" unless the stack was held back by a busy core at this level: then its share
    of that core and its wait, the fair figures there."""
    if not core_limited(step):
        return ""
    cap = capacity(step) / 100
    cores = "its core" if cap <= 1 else f"its {cap:.0f} cores"
    shared = "shared and full" if step.core_full else "busy with other work"
    return (
        f"{cores} {shared}: it ran {_share(step.cpu_percent or 0.0, cap)} and waited "
        f"{_share(step.cpu_wait_percent or 0.0, cap)} of the time"
    )


def _share(percent_of_one_core: float, cores: float) -> str:
    """A share of the time, never above 100 %: % of one core over the cores it has."""
    return f"{min(100.0, percent_of_one_core / max(1.0, cores)):.0f}%"


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
        """The race's verdict, for the header, in words (no summed percentages)."""
        where = "one core, which is" if self.cores == 1 else f"{self.cores} cores, which are"
        return f"the {self.stacks} stacks share {where} full: figures compare shares"


def shared_core(cpu: list[tuple[float, float]], cores: int) -> SharedCore:
    """The shared cores' state from each stack's (CPU used, CPU waited for), % of a core."""
    return SharedCore(
        cores=max(1, cores),
        used=sum(u for u, _w in cpu),
        waited=sum(w for _u, w in cpu),
        stacks=len(cpu),
    )
