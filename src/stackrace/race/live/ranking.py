"""`k` in the app: every loaded stack's capacity under the SLO, searched at once, then ranked.

The session owns one `CapacityRanking` (`session.ranking`, the `k` key's feature); the
race screen starts and stops it, the session's poll advances it (race/live/capacity.py
runs the search itself: the same search, judge and answers-needed rule as `bench
--capacity`). A hand on the load (the slider, `m`, a
ramp) stops it, keeping what it found so far; when it ends, every stack goes back to
the level it started from and the screen shows the ranking.

Kept apart from race/live/session.py so that the session stays one job (its commands and
ticks) and this feature is read in one place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from stackrace.race.core.capacity_plan import CapacityPlan
from stackrace.race.live.capacity import LiveCapacity
from stackrace.report.capacity import rank_key
from stackrace.report.schema import CapacityResult

if TYPE_CHECKING:
    from stackrace.race.core.core import RaceCore
    from stackrace.report.slo import Slo


class RankedSession(Protocol):
    """What the ranking needs of its session (race/live/session.py `Session` fits): its
    load, a ramp to stop, and a way to say what it did. Declared here, so the session
    that holds a ranking is above it and no type name points back up."""

    core: RaceCore
    slo: Slo | None
    stopping: bool

    @property
    def level(self) -> int: ...
    def stop_ramp(self) -> None: ...
    def new_level(self) -> None: ...
    def tell(self, what: str, value: object) -> None: ...


class CapacityRanking:
    def __init__(self, session: RankedSession) -> None:
        self.session = session
        self.search: LiveCapacity | None = None  # the search running now
        self.results: dict[str, CapacityResult] = {}  # what the last one found
        self.finished = False  # a search has just ended: show its ranking
        self.end = ""  # how it ended, in words
        self._restore: float = 10  # the level to go back to

    def start(self, budget_s: float | None = None) -> str:
        """Start the search from the level running now; why it cannot ("" started)."""
        s = self.session
        if s.stopping:
            return "stopping"
        if s.slo is None:
            return "no SLO to search under: start with --slo 'p99<50ms'"
        ids = s.core.attached()
        if not ids:
            return "no stack is loaded yet"
        s.stop_ramp()
        self.finished = False
        self.results = {}
        self.end = ""
        self._restore = float(s.core.rate) if s.core.rate is not None else s.core.concurrency
        self.search = LiveCapacity(
            s.core,
            CapacityPlan(s.slo.text, budget_s=budget_s),
            ids,
            start=float(s.level),
            rate_mode=s.core.rate is not None,
            max_probe_s=s.core.settings.duration,
        )
        s.tell("capacity", s.slo.text)
        return ""

    def stop(self) -> None:
        """A hand on the load stops the search; what it found so far is kept (each
        result says how far it got)."""
        if self.search is None:
            return
        self.results = self.search.results()
        self.end = f"was stopped by hand at probe {self.search.round}"
        self.search = None
        self.session.tell("capacity_stop", None)

    async def advance(self) -> None:
        search, s = self.search, self.session
        if search is None:
            return
        await search.advance(s.core.clock())
        if not search.done:
            return
        self.results = search.results()
        self.end = f"ended after {search.round} probes"
        self.search = None
        self.finished = True
        # back to the level it started from, every stack at one load again
        await s.core.set_level(self._restore)
        s.new_level()
        s.tell("capacity_done", None)

    def ranked(self) -> list[tuple[str, CapacityResult]]:
        """The last search's findings by stack name, best first (report/capacity.py's
        order: the one ranking bench, tune and the app share)."""

        members = self.session.core.members
        rows = [(members[i].handle.name if i in members else i, c) for i, c in self.results.items()]
        return sorted(rows, key=lambda r: rank_key(r[1]))

    def loads(self) -> dict[str, float]:
        """Each stack's probe load now (empty when no search runs)."""
        return self.search.loads() if self.search is not None else {}
