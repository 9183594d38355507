"""Snapshot tests: the picker and the race screen, as SVG, against approved files.

The stream is synthetic and stepped by hand, so the screens are the same on every run.
After a deliberate change to the look, approve the new screens with

    STACKRACE_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/tui/test_snapshot.py

On a mismatch the screen that was drawn is written next to the approved one as
`NAME.actual.svg` (convert both with rsvg-convert to compare by eye).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from stackrace.race.demo import CATALOG
from stackrace.race.session import RacePlan
from stackrace.tui.app import StackraceApp
from tests.tui.conftest import SIZE, open_race, plan, synthetic_session

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("STACKRACE_UPDATE_SNAPSHOTS") == "1"


def _normalise(svg: str) -> str:
    # Rich names CSS classes after a hash of the whole screen; the drawing is what matters
    return re.sub(r"terminal-\d+", "terminal", svg)


def check_snapshot(name: str, svg: str) -> None:
    approved = SNAPSHOTS / f"{name}.svg"
    actual = SNAPSHOTS / f"{name}.actual.svg"
    if UPDATE or not approved.exists():
        SNAPSHOTS.mkdir(exist_ok=True)
        approved.write_text(svg, encoding="utf-8")
        actual.unlink(missing_ok=True)
        return
    if _normalise(approved.read_text(encoding="utf-8")) != _normalise(svg):
        actual.write_text(svg, encoding="utf-8")
        raise AssertionError(f"{name} differs from {approved} (drawn: {actual})")
    actual.unlink(missing_ok=True)


async def test_snapshot_race_screen():
    async for race in open_race(plan(concurrency=200)):
        await race.advance(24)
        check_snapshot("race_io_c200", race.app.export_screenshot())


async def test_snapshot_picker():
    app = StackraceApp(synthetic_session(), RacePlan(), list(CATALOG), tick_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        check_snapshot("picker", app.export_screenshot())


async def test_snapshot_small_terminal_keeps_the_essentials():
    async for race in open_race(plan(concurrency=1000), size=(100, 30)):
        await race.advance(24)
        check_snapshot("race_100x30_c1000", race.app.export_screenshot())


async def test_snapshot_projector_mode():
    async for race in open_race(plan(concurrency=1000)):
        await race.advance(16)
        await race.pilot.press("b")
        await race.advance(8)
        check_snapshot("race_projector", race.app.export_screenshot())


async def test_snapshot_ramp_summary_with_the_combined_chart():
    async for race in open_race(plan(concurrency=10)):
        await race.advance(6)
        race.session.start_ramp(top=1000, dwell=3.0)
        await race.advance(130)
        assert race.session.ramp is None
        await race.pilot.pause()
        check_snapshot("ramp_summary", race.app.export_screenshot())
