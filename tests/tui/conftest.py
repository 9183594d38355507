"""Fixtures for the TUI tests: the app over the synthetic, deterministic engine."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Static

from stackrace.engine.model import TargetSpec
from stackrace.race.core.core import RaceCore
from stackrace.race.core.plan import RacePlan
from stackrace.race.live.demo import CATALOG, DemoSource, SyntheticEngine
from stackrace.race.live.session import Session
from stackrace.settings.race_settings import RaceSettings
from stackrace.tui.app import StackraceApp
from stackrace.tui.race import RaceScreen


class RecordingEngine(SyntheticEngine):
    """The synthetic engine, recording what the driver asked of it (a test spy)."""

    def __init__(self) -> None:
        super().__init__()
        self.commands: list[tuple[str, object]] = []

    async def add_target(
        self, spec: TargetSpec, cpus: Sequence[int] | None = None, procs: int | None = None
    ) -> None:
        await super().add_target(spec, cpus, procs)
        self.commands.append(("add", spec.id))

    async def remove_target(self, target_id: str) -> None:
        await super().remove_target(target_id)
        self.commands.append(("remove", target_id))

    async def set_concurrency(self, n: int, target_id: str | None = None) -> None:
        await super().set_concurrency(n, target_id)
        if not self.commands or self.commands[-1] != ("concurrency", n):
            self.commands.append(("concurrency", n))

    async def set_rate(self, rate: float | None, target_id: str | None = None) -> None:
        await super().set_rate(rate, target_id)
        if not self.commands or self.commands[-1] != ("rate", rate):
            self.commands.append(("rate", rate))


def synthetic_session() -> Session:
    engine = RecordingEngine()
    return Session(RaceCore(engine, DemoSource(engine), clock=engine.clock, sample_every=0.0))


def recording_engine(session: Session) -> RecordingEngine:
    """The engine of a `synthetic_session` (a session holds any LoadEngine)."""
    assert isinstance(session.engine, RecordingEngine)
    return session.engine


SIZE = (160, 48)
FOUR = ("gunicorn-sync", "gunicorn-gevent", "uvicorn", "aiohttp")


async def settled_screenshot(app: StackraceApp, pilot: Pilot[Any]) -> str:
    """The screen once its layout has settled: a mode change (projector, a resize)
    re-plans every pane's digits after the next refresh (`call_after_refresh`), and on
    a busy machine `pilot.pause()` can return before that refresh has run (one full
    run drew a pane's figure at its old size; the picker's footer once lacked the
    focused list's keys). Two equal exports 50 ms apart, or the last one after 4 s."""
    shot = app.export_screenshot()
    for _ in range(80):
        await pilot.pause(0.05)
        again = app.export_screenshot()
        if again == shot:
            break
        shot = again
    return shot


@dataclass
class Race:
    app: StackraceApp
    pilot: Pilot
    session: Session

    @property
    def engine(self) -> RecordingEngine:
        return recording_engine(self.session)

    @property
    def screen(self) -> RaceScreen:
        assert self.app.race is not None
        return self.app.race

    async def advance(self, steps: int = 1) -> None:
        """Publish `steps` snapshots, each followed by one UI tick, as the 4 Hz timer would."""
        for _ in range(steps):
            self.engine.step()
            await self.screen.tick()
        await self.pilot.pause()

    async def screenshot(self) -> str:
        """The screen once its layout has settled (`settled_screenshot`)."""
        return await settled_screenshot(self.app, self.pilot)

    def text(self, selector: str) -> str:
        """The plain text of a Static (or any widget) on the race screen."""
        widget = self.screen.query_one(selector)
        if isinstance(widget, Static):
            return str(widget.content)
        return str(widget.render())


def subtitle(widget: Widget) -> str:
    """A widget's border subtitle: Textual types it `str | None`, and a pane always has one."""
    assert widget.border_subtitle is not None, widget
    return widget.border_subtitle


def plan(stacks=FOUR, concurrency=10, workload="io", rate=None) -> RacePlan:
    return RacePlan(
        stacks=tuple(stacks),
        settings=RaceSettings(workload=workload),
        concurrency=concurrency,
        rate=rate,
    )


async def open_race(
    p: RacePlan,
    session: Session | None = None,
    size: tuple[int, int] = SIZE,
    settle: int = 1,
) -> AsyncIterator[Race]:
    """The app on `p` over the synthetic engine (or `session`, a test's own, with a
    recorder or a ghost), already advanced `settle` intervals."""
    session = session or synthetic_session()
    app = StackraceApp(session, p, list(CATALOG), show_picker=False, tick_interval=None)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        race = Race(app, pilot, session)
        if settle:
            await race.advance(settle)
        yield race


@pytest.fixture(autouse=True)
def _own_config_dir(tmp_path, monkeypatch):
    """Remembered picker choices go to a directory of the test's own, never the user's."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


@pytest.fixture
async def race() -> AsyncIterator[Race]:
    async for r in open_race(plan()):
        yield r
