"""What the user chose for a race (the picker, the command line, a preset): a `RacePlan`."""

from __future__ import annotations

from dataclasses import dataclass, field

from stackrace.race.core.urls import UrlTarget
from stackrace.settings.race_settings import RaceSettings


@dataclass(frozen=True)
class RacePlan:
    """What the user chose: stacks, URL targets, the race settings and the first level."""

    stacks: tuple[str, ...] = ()
    urls: tuple[UrlTarget, ...] = ()
    settings: RaceSettings = field(default_factory=RaceSettings)
    concurrency: int = 10
    rate: float | None = None  # req/s per stack; None = closed loop
    note: str = ""  # shown as the race opens (`--app X --go`: the servers left out)

    @property
    def workload(self) -> str:
        return self.settings.workload
