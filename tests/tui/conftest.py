"""Fixtures for the TUI tests: the app over the synthetic, deterministic engine."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from stackrace.session import RacePlan, Session, Workload
from stackrace.tui.app import StackraceApp
from stackrace.tui.race import RaceScreen
from stackrace.tui.synthetic import CATALOG, SyntheticEngine, synthetic_session

SIZE = (160, 48)
FOUR = ("gunicorn-sync", "gunicorn-gevent", "uvicorn", "aiohttp")


@dataclass
class Race:
    app: StackraceApp
    pilot: Pilot
    session: Session

    @property
    def engine(self) -> SyntheticEngine:
        assert isinstance(self.session.engine, SyntheticEngine)
        return self.session.engine

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

    def text(self, selector: str) -> str:
        """The plain text of a Static (or any widget) on the race screen."""
        widget = self.screen.query_one(selector)
        if isinstance(widget, Static):
            return str(widget.content)
        return str(widget.render())


def plan(stacks=FOUR, concurrency=10, workload="io", rate=None) -> RacePlan:
    return RacePlan(
        stacks=tuple(stacks), workload=Workload(workload), concurrency=concurrency, rate=rate
    )


async def open_race(p: RacePlan) -> AsyncIterator[Race]:
    session = synthetic_session()
    app = StackraceApp(session, p, list(CATALOG), show_picker=False, tick_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        race = Race(app, pilot, session)
        await race.advance(1)
        yield race


@pytest.fixture
async def race() -> AsyncIterator[Race]:
    async for r in open_race(plan()):
        yield r
