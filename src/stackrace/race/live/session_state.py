"""What of a live session its views read: `SessionState`, a Protocol that `Session` fits.

    session_view(session)      # race/live/view.py: the panes, from a SessionState
    pane_why(session, mid, j)  # race/live/why_view.py: the why of one pane

The session builds its views (race/live/view.py, why_view.py) at every tick, and the
views read the session: declared as `Session`, that made a circle of four modules
(session -> view -> session) with nothing in it but type names. The views declare here
what they read, and `Session` fits it (mypy checks that where the session hands itself
over), so the session sits above its views and nothing in race/live points back up.
(A field of the session is declared as a field, a property of it as a property.)
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
    from stackrace.rules.level_log import LevelLog, Ramp


class SessionState(Protocol):
    """A live race as its views read it (race/live/session.py `Session` is the one)."""

    core: RaceCore
    levels: LevelLog
    keeper: VerdictKeeper
    ranking: CapacityRanking
    slo: Slo | None
    then: Then | None
    started_at: float
    stopping: bool
    ended: str
    caption: str
    ghosts: list[Ghost]
    # the ramp: running (`ramp`, after its clean start `prep`), or what the last found
    ramp: Ramp | None
    prep: CleanStart | None
    ramp_top: int
    ramp_finished: bool
    ramp_steps: dict[str, list[StepResult]]
    ramp_breaking: dict[str, LevelVerdict | None]
    # a replay's position and its recorded ramp label
    replay_status: str
    replay_ramp: str | None

    @property
    def concurrency(self) -> int: ...
    @property
    def rate(self) -> float | None: ...
    @property
    def level(self) -> int: ...
    @property
    def synthetic(self) -> bool: ...
    @property
    def summary_from_ramp(self) -> bool: ...
    def shared_core(self) -> SharedCore | None: ...
