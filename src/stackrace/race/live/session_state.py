"""What of a live session its views read: `SessionState`, a Protocol that `Session` fits.

    session_view(session)      # race/live/view.py: the panes, from a SessionState
    pane_why(session, mid, j)  # race/live/why_view.py: the why of one pane

The session builds its views (race/live/view.py, why_view.py) at every tick, and the
views read the session: declared as `Session`, that made a circle of four modules
(session -> view -> session) with nothing in it but type names. The views declare here
what they read, and `Session` fits it (mypy checks that where the session hands itself
over), so the session sits above its views and nothing in race/live points back up.
Read-only properties, so a field and a property of the session fit alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from stackrace.race.core.cleanstart import CleanStart
    from stackrace.race.core.core import RaceCore
    from stackrace.race.live.ranking import CapacityRanking
    from stackrace.race.live.verdict_keeper import VerdictKeeper
    from stackrace.race.playback.ghost import Ghost
    from stackrace.report.schema import Then
    from stackrace.report.slo import Slo
    from stackrace.rules.breaking import LevelVerdict, StepResult
    from stackrace.rules.cores import SharedCore
    from stackrace.rules.levels import LevelLog, Ramp


class SessionState(Protocol):
    """A live race as its views read it (race/live/session.py `Session` is the one)."""

    @property
    def core(self) -> RaceCore: ...
    @property
    def levels(self) -> LevelLog: ...
    @property
    def keeper(self) -> VerdictKeeper: ...
    @property
    def ranking(self) -> CapacityRanking: ...
    @property
    def concurrency(self) -> int: ...
    @property
    def rate(self) -> float | None: ...
    @property
    def level(self) -> int: ...
    @property
    def slo(self) -> Slo | None: ...
    @property
    def then(self) -> Then | None: ...
    @property
    def synthetic(self) -> bool: ...
    @property
    def started_at(self) -> float: ...
    @property
    def stopping(self) -> bool: ...
    @property
    def ended(self) -> str: ...
    @property
    def caption(self) -> str: ...
    @property
    def ghosts(self) -> list[Ghost]: ...
    # the ramp: running (`ramp`, after its clean start `prep`), or what the last found
    @property
    def ramp(self) -> Ramp | None: ...
    @property
    def prep(self) -> CleanStart | None: ...
    @property
    def ramp_top(self) -> int: ...
    @property
    def ramp_finished(self) -> bool: ...
    @property
    def ramp_steps(self) -> dict[str, list[StepResult]]: ...
    @property
    def ramp_breaking(self) -> dict[str, LevelVerdict | None]: ...
    @property
    def summary_from_ramp(self) -> bool: ...
    # a replay's position and its recorded ramp label
    @property
    def replay_status(self) -> str: ...
    @property
    def replay_ramp(self) -> str | None: ...
    def shared_core(self) -> SharedCore | None: ...
