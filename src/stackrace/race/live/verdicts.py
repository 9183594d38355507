"""What a race shows of its judgments: the shared core's state, and a pane's judgment
held steady.

**A shared core is the race's verdict, not each stack's.** When stacks share cores (two
cores: the engines get one, four stacks share the other), each stack gets a share of a
full core and waits for it the rest of the time. `shared_core_of` reads every stack's
CPU from the race core; whether those cores were full, and what that means for each
stack's judgment, are the rules' (stackrace.rules.cores).

**Toward worse at once, back only once it holds.** A level is judged anew on every
interval (stackrace.rules.level, on the level's running totals); a state that comes and
goes every second tells a room nothing. `JudgmentHold` shows a worse state (queueing
after keeping up, failing after queueing) the moment it is judged — a FAILING pane must
never wait for evidence already in — and a better one only once it has held for `HOLD`
seconds; it remembers since when the state shown has held; a new level starts afresh.
"""

from __future__ import annotations

from stackrace.race.core.core import RaceCore
from stackrace.rules.cores import SharedCore, shared_core
from stackrace.rules.level import MEASURING, SEVERITY, Judgment

HOLD = 2.0  # seconds a better state must hold before it is shown


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


class JudgmentHold:
    """One pane's judgment: worse at once, better once it has held `HOLD` seconds."""

    def __init__(self, hold: float = HOLD) -> None:
        self.hold = hold
        self.level: int | None = None
        self.shown: Judgment | None = None
        self.since: float | None = None  # when the state shown began
        # since when the judgments have been better than the state shown (whichever
        # better state: two of them taking turns must not restart the clock)
        self._better_since: float | None = None

    def feed(self, now: float, fresh: Judgment) -> tuple[Judgment, float]:
        """The judgment to show now, and since when its state has held."""
        if fresh.level != self.level or self.shown is None:
            # a new level is judged afresh
            self.level = fresh.level
            self._show(fresh, now)
        shown = self.shown
        assert shown is not None and self.since is not None
        if fresh.state == shown.state:
            self._better_since = None
            self.shown = fresh  # the same state: its figures follow the measurement
        elif shown.state == MEASURING or SEVERITY[fresh.state] >= SEVERITY[shown.state]:
            self._show(fresh, now)
        else:
            if self._better_since is None:
                self._better_since = now
            if now - self._better_since >= self.hold:
                self._show(fresh, self._better_since)
        assert self.shown is not None and self.since is not None
        return self.shown, self.since

    def _show(self, judgment: Judgment, since: float) -> None:
        self.shown, self.since = judgment, since
        self._better_since = None
