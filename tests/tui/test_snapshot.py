"""Snapshot tests: the picker and the race screen, as SVG, against approved files.

The stream is synthetic and stepped by hand, so the screens are the same on every run.
After a deliberate change to the look, approve the new screens with

    STACKRACE_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/tui/test_snapshot.py

On a mismatch, or when a screen has no approved file yet, the screen that was drawn is
written next to the approved one as `NAME.actual.svg` (convert both with rsvg-convert to
compare by eye) and the test fails. A missing approved file is a failure, not an
approval: otherwise a snapshot lost from the repository (or never committed) would pass
on every run, comparing the screen with itself. Approving is always that explicit step.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from stackrace.race.core.plan import RacePlan
from stackrace.race.live.demo import CATALOG
from stackrace.tui.app import StackraceApp
from tests.tui.conftest import SIZE, open_race, plan, settled_screenshot, synthetic_session

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("STACKRACE_UPDATE_SNAPSHOTS") == "1"


def _normalise(svg: str) -> str:
    # Rich names CSS classes after a hash of the whole screen; the drawing is what matters
    return re.sub(r"terminal-\d+", "terminal", svg)


APPROVE = "STACKRACE_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/tui/test_snapshot.py"


def check_snapshot(name: str, svg: str, snapshots: Path = SNAPSHOTS, update: bool = UPDATE) -> None:
    """Compare `svg` with the approved `snapshots/NAME.svg`; write it there only when
    `update` (STACKRACE_UPDATE_SNAPSHOTS=1) says so."""
    approved = snapshots / f"{name}.svg"
    actual = snapshots / f"{name}.actual.svg"
    if update:
        snapshots.mkdir(exist_ok=True)
        approved.write_text(svg, encoding="utf-8")
        actual.unlink(missing_ok=True)
        return
    if not approved.exists():
        snapshots.mkdir(exist_ok=True)
        actual.write_text(svg, encoding="utf-8")
        raise AssertionError(
            f"{name}: no approved snapshot {approved} (drawn: {actual}); "
            f"look at it, then approve it with {APPROVE}"
        )
    if _normalise(approved.read_text(encoding="utf-8")) != _normalise(svg):
        actual.write_text(svg, encoding="utf-8")
        raise AssertionError(
            f"{name} differs from {approved} (drawn: {actual}); "
            f"if the change is meant, approve it with {APPROVE}"
        )
    actual.unlink(missing_ok=True)


def test_a_missing_approved_snapshot_fails_and_approves_nothing(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match=r"no approved snapshot.*STACKRACE_UPDATE_SNAPSHOTS=1"):
        check_snapshot("screen", "<svg>drawn</svg>", snapshots=tmp_path, update=False)
    assert not (tmp_path / "screen.svg").exists()  # nothing approved by running the test
    assert (tmp_path / "screen.actual.svg").read_text() == "<svg>drawn</svg>"
    # the explicit step approves it, and from then on the same screen passes
    check_snapshot("screen", "<svg>drawn</svg>", snapshots=tmp_path, update=True)
    check_snapshot("screen", "<svg>drawn</svg>", snapshots=tmp_path, update=False)
    assert not (tmp_path / "screen.actual.svg").exists()
    with pytest.raises(AssertionError, match="differs"):
        check_snapshot("screen", "<svg>other</svg>", snapshots=tmp_path, update=False)


async def test_snapshot_race_screen():
    async for race in open_race(plan(concurrency=200)):
        await race.advance(24)
        check_snapshot("race_io_c200", await race.screenshot())


async def test_snapshot_picker():
    app = StackraceApp(synthetic_session(), RacePlan(), list(CATALOG), tick_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        check_snapshot("picker", await settled_screenshot(app, pilot))


async def test_snapshot_small_terminal_keeps_the_essentials():
    async for race in open_race(plan(concurrency=1000), size=(100, 30)):
        await race.advance(24)
        check_snapshot("race_100x30_c1000", await race.screenshot())


# Its p99 figures once changed with when the layout settled: a re-layout drew the newest
# interval's p99, not the one on screen (fixed; test_layout.py holds it).
async def test_snapshot_projector_mode():
    async for race in open_race(plan(concurrency=1000)):
        await race.advance(16)
        await race.pilot.press("b")
        await race.advance(8)
        check_snapshot("race_projector", await race.screenshot())


async def test_snapshot_ramp_summary_with_the_combined_chart():
    async for race in open_race(plan(concurrency=10)):
        await race.advance(6)
        race.session.start_ramp(top=1000, dwell=3.0)
        await race.advance(130)
        assert race.session.ramp is None
        await race.pilot.pause()
        check_snapshot("ramp_summary", await race.screenshot())
