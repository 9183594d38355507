"""The real app, opened from a command line the way `stackrace` opens it
(`commands.app.make_app`), on the real stacks and engine, driven with Textual's Pilot."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from textual.pilot import Pilot

from stackrace.cli import build_parser
from stackrace.commands.app import make_app
from stackrace.commands.app_args import app_options
from stackrace.race.core.state import StackState
from stackrace.race.live.view import PaneView, SessionView
from stackrace.tui.app import StackraceApp
from stackrace.tui.race import RaceScreen
from tests.walkthrough.terminal import MARK, kill_left, wait_none_left

LIVE = (StackState.READY, StackState.WARMING)


@contextlib.asynccontextmanager
async def real_app(
    argv: list[str], size: tuple[int, int] = (160, 48), screenshots: Path | None = None
) -> AsyncIterator[tuple[StackraceApp, Pilot]]:
    """`stackrace ARGV` in Pilot. Every process it starts carries a marker in its
    environment; once the app is closed, none may be left (`wait_none_left`). Those
    left are killed whatever ended the test, so one failure stays one failure: a race
    left loading (eight stacks and their engine, once) slows every test after it."""
    mark = uuid.uuid4().hex
    saved = os.environ.get(MARK)
    os.environ[MARK] = mark
    left: list[str] = []
    try:
        parser = build_parser()
        parser.set_defaults(argv=list(argv))  # as cli.py does: the line, for a crash log
        args = parser.parse_args(argv)
        app = make_app(app_options(args))
        if screenshots is not None:
            app.screenshot_dir = screenshots
        async with app.run_test(size=size) as pilot:
            yield app, pilot
            if app.crash is None:
                await pilot.press("q")
                await pilot.pause(0.2)
        assert app.crash is None, f"the app crashed: {app.crash!r} ({app.crash_log})"
    finally:
        left = [p for p in wait_none_left(mark, 20.0) if not p.startswith(f"{os.getpid()}:")]
        kill_left(left)
        if saved is None:
            os.environ.pop(MARK, None)
        else:
            os.environ[MARK] = saved
    assert not left, f"left running after the app closed: {left}"


async def wait_for(
    app: StackraceApp, pilot: Pilot, done: Callable[[SessionView], bool], timeout: float
) -> SessionView | None:
    """Poll the race's last view (the app's own 4 Hz timer makes it) until `done`."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end:
        await pilot.pause(0.25)
        race = app.race
        if race is not None and race.last_view is not None and done(race.last_view):
            return race.last_view
    return None


def race_of(app: StackraceApp) -> RaceScreen:
    """The app's race screen, which a test that waited for a view knows is there."""
    assert app.race is not None, "the race never started"
    return app.race


def panes_shown(app: StackraceApp) -> list[PaneView]:
    """The panes of the race's last view (none before the race draws one): what a
    failure message shows."""
    view = app.race.last_view if app.race is not None else None
    return view.panes if view is not None else []


def all_loaded(view: SessionView) -> bool:
    """Every stack up and answering: ready (or warming), its target fed with answers."""
    return bool(view.panes) and all(
        p.state in LIVE and p.target is not None and p.target.total.requests > 0 for p in view.panes
    )


def why_not(view: SessionView | None) -> str:
    """What each pane that is not loaded says (its state and log), for a failure."""
    if view is None:
        return "the race never started"
    out = []
    for p in view.panes:
        if p.state in LIVE and p.target is not None and p.target.total.requests > 0:
            continue
        log = " | ".join(p.log_tail[-4:])
        out.append(f"{p.id}: {p.state.value}, {p.refused or ''} {log}")
    return "; ".join(out) + (f"; errors: {view.errors}" if view.errors else "")
