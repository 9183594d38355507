"""Verdicts that fit the machine: a full shared core, and kinds that do not flip on noise.

**A shared core is the race's verdict, not each stack's.** When stacks share cores
(two cores: the engines get one, four stacks share the other), each stack gets a share
of a full core and waits for it the rest of the time. Judged one by one, every pane
would read SATURATED — "uvicorn broke" — when what happened is that the core was full.
`shared_core` says, from every stack's CPU, whether the shared cores were full; the
header then says so ("figures compare shares, not capacities"), the breaking rule
leaves a stack that only waited for that core without a verdict of its own
(`ramp.StepResult.core_starved`), and each pane gives its own share, its wait, and
what it would serve alone on a core from its own CPU per request (`alone_on_a_core`).
SATURATED stays for a stack that is itself CPU-bound.

**Hysteresis.** A verdict judged on running totals can cross a threshold back and
forth; a banner that comes and goes every second tells a room nothing, and a pane that
says QUEUEING, then SATURATED, then nothing at one level is read as three events.
`VerdictHold` shows a level's judgement at once while the level settles (its first
`HOLD` seconds of judgements: its totals are young and may still cross a threshold
once, as a queue builds), then a new kind (or its absence) only once it has held for
`HOLD` seconds, and remembers since when the kind shown has held; a new level starts
afresh.
"""

from __future__ import annotations

from dataclasses import dataclass

from stackrace.race.core.core import RaceCore
from stackrace.rules.breaking import LevelVerdict, StepResult

HOLD = 2.0  # seconds a new verdict kind (or none) must hold before it is shown
SHARED_FULL = 0.85  # the shared cores are full when the stacks use this share of them,
WAITED_FULL = 0.25  # ... or when they want more than the cores give and wait this much


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
        """The race's verdict, for the header."""
        cores = f"{self.cores} cores" if self.cores > 1 else "core"
        return (
            f"the shared {cores} {'are' if self.cores > 1 else 'is'} full (the stacks "
            f"used {self.used:.0f}%, waited {self.waited:.0f}%): figures compare shares, "
            "not capacities"
        )


def shared_core(cpu: list[tuple[float, float]], cores: int) -> SharedCore:
    """The shared cores' state from each stack's (CPU used, CPU waited for), % of a core."""
    return SharedCore(
        cores=max(1, cores),
        used=sum(u for u, _w in cpu),
        waited=sum(w for _u, w in cpu),
        stacks=len(cpu),
    )


def shared_core_of(core: RaceCore) -> SharedCore | None:
    """The shared cores' state in a race, from its stacks' latest samples (None when
    each stack has cores of its own: then every verdict is the stack's)."""
    placement = core.placement
    if placement is None or not placement.shared:
        return None
    cpu = [
        (m.resources.cpu_percent, m.resources.cpu_wait_percent)
        for m in core.members.values()
        if m.resources is not None and m.stack_cpus is not None and not m.handle.external
    ]
    cores = len(placement.stack_cpus[0] or []) if placement.stack_cpus else 1
    return shared_core(cpu, cores)


def core_share(step: StepResult | None) -> str:
    """ "" unless the stack only waited for a full shared core at this level: then its
    share of that core and its wait, the fair figures there."""
    if step is None or not step.core_starved or step.cpu_bound:
        return ""
    cap = (step.cpu_capacity or 100.0) / 100
    cores = "the full core" if cap <= 1 else f"the {cap:.0f} full cores"
    return (
        f"its share of {cores}: CPU {step.cpu_percent or 0:.0f}%, "
        f"waited {step.cpu_wait_percent or 0:.0f}%"
    )


def alone_on_a_core(cpu_us_per_request: float | None, cores: float = 1.0) -> float | None:
    """What a stack would serve alone on `cores` cores, from its own CPU per request
    (an upper bound: it leaves out everything but the stack's own CPU)."""
    if not cpu_us_per_request or cpu_us_per_request <= 0:
        return None
    return cores * 1e6 / cpu_us_per_request


@dataclass
class Shown:
    verdict: LevelVerdict | None
    proof: str
    since: float | None  # when the kind shown began to hold (None: no verdict)


class VerdictHold:
    """One pane's verdict, changed only when a new kind has held for `HOLD` seconds."""

    def __init__(self, hold: float = HOLD) -> None:
        self.hold = hold
        self.level: int | None = None
        self.shown = Shown(None, "", None)
        self._candidate: str | None = None  # the kind (or "" for none) waiting to show
        self._candidate_since = 0.0
        self._judged_at: float | None = None  # the level's first judgement

    def feed(
        self,
        now: float,
        level: int | None,
        fresh: LevelVerdict | None,
        proof: str,
        judged: bool = True,
    ) -> Shown:
        """The verdict to show now, given the one judged now (`fresh`, with its proof;
        `judged`: the level had figures enough to be judged at all)."""
        if level != self.level:
            # a new level clears the verdict: it is judged afresh there
            self.level = level
            self.shown = Shown(None, "", None)
            self._candidate = None
            self._judged_at = None
        if self._judged_at is None and not (judged or fresh is not None):
            return self.shown  # not judged yet: "measuring"
        if self._judged_at is None:
            self._judged_at = now
        kind = fresh.kind if fresh is not None else ""
        shown_kind = self.shown.verdict.kind if self.shown.verdict is not None else ""
        if now - self._judged_at < self.hold and kind != shown_kind:
            # the level settles: its judgement is shown as it comes
            self._candidate = None
            self.shown = Shown(fresh, proof, now if fresh is not None else None)
            return self.shown
        if kind == shown_kind:
            self._candidate = None
            if fresh is not None:  # the same kind: its figures follow the measurement
                self.shown = Shown(fresh, proof, self.shown.since)
            return self.shown
        if self._candidate != kind:
            self._candidate, self._candidate_since = kind, now
        if now - self._candidate_since >= self.hold:
            since = self._candidate_since if fresh is not None else None
            self.shown = Shown(fresh, proof if fresh is not None else "", since)
            self._candidate = None
        return self.shown
