"""`StackraceApp`: the picker, then the race.

The app only shows: it receives a ready race (`StackraceApp.for_race`, from
race/live/setup.py's `AppRace`: the session, its first plan, the picker's catalog) and
builds no engine, source, demo, recorder or exporter itself. `stackrace` opens it
through commands/app.py (`make_app`, `run_app`); `stackrace replay` hands it a player.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual.app import App
from textual.binding import Binding, BindingType

from stackrace.base import crashlog, startgc
from stackrace.base.printable import terminal
from stackrace.race.core.members import StackChoice
from stackrace.race.core.plan import RacePlan
from stackrace.race.live.choices import Choices, load_choices, save_choices
from stackrace.race.live.replay import ReplayPlayer
from stackrace.race.live.session import Session
from stackrace.tui.picker import PickerScreen
from stackrace.tui.race import RaceScreen

if TYPE_CHECKING:
    from stackrace.race.live.setup import AppRace


class StackraceApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "stackrace"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),
        # every screen (picker, race, summary, log): an input field that wants the
        # letter gets it first, since this binding is not a priority one
        Binding("s", "screenshot", "screenshot"),
    ]

    def __init__(
        self,
        session: Session,
        plan: RacePlan,
        catalog: list[StackChoice],
        *,
        show_picker: bool = True,
        tick_interval: float | None = 0.25,
        screenshot_dir: str | os.PathLike[str] = ".",
        drive: Callable[[], object] | None = None,
        projector: bool = False,
        remember: bool = False,
        player: ReplayPlayer | None = None,
        notice: str = "",
    ) -> None:
        super().__init__()
        self.notice = notice  # the stacks files read, when one is not the package's
        self.player = player  # a replay: the recording drives the session
        self.projector = projector
        self.remember = remember  # the picker opens with, and saves, the last choices
        self.session = session
        self.plan = plan
        self.catalog = catalog
        self.show_picker = show_picker
        self.tick_interval = tick_interval
        self.screenshot_dir = Path(screenshot_dir)
        self.race: RaceScreen | None = None
        self._stopping: asyncio.Future[None] | None = None
        self.drive = drive  # called at 4 Hz: steps a synthetic engine (demo mode)
        self.argv: list[str] = []  # the command line, for a crash log
        self.crash_log: Path | None = None
        self.crash: BaseException | None = None
        self.start_error: str | None = None  # the race did not start: said on exit

    @classmethod
    def for_race(cls, race: AppRace) -> StackraceApp:
        """The app showing a race made by race/live/setup.py (what `stackrace` opens)."""
        app = cls(
            race.session,
            race.plan,
            race.catalog,
            show_picker=race.show_picker,
            drive=race.drive,
            projector=race.projector,
            remember=race.remember,
            notice=race.notice,
        )
        app.argv = list(race.argv)
        return app

    def _handle_exception(self, error: Exception) -> None:
        """A bug of ours while the app runs: the details go to a crash log, and the app
        exits with status 70 and one line instead of a screen-wide traceback (Textual's
        own handling exits with 1, which the shell saw as 0 through `run() or 0`).
        Textual's handling still runs, so Pilot tests see the exception re-raised and
        the screens unmount (which stops every stack)."""
        if self.crash is None:
            self.crash = error
            self.crash_log = crashlog.record(error, self.argv)
        super()._handle_exception(error)
        self._exit_renderables.clear()  # the traceback is in the crash log
        self._return_code = crashlog.EXIT_INTERNAL

    async def on_mount(self) -> None:
        # the cyclic collector, paused for the start (cli.py), on again after the first
        # frame: Textual's start makes objects that live as long as the app too
        self.call_after_refresh(startgc.resume)
        self.theme = "textual-dark"
        if self.drive is not None:
            self.set_interval(0.25, self.drive, name="drive")
        if self.session.synthetic:
            self.title = "stackrace — SYNTHETIC DEMO (no servers, no load)"
        if self.notice:  # a stacks file outside the package decides what runs: say so
            self.notify(terminal(self.notice), title="stacks files", timeout=15, markup=False)
        if self.show_picker:
            plan = self._remembered(self.plan) if self.remember else self.plan
            self.push_screen(
                PickerScreen(self.catalog, plan, synthetic=self.session.synthetic),
                callback=self._picked,
            )
        else:
            await self.start_race(self.plan)

    def _remembered(self, plan: RacePlan) -> RacePlan:
        """The plan with the last race's choices, unless the command line chose stacks."""
        last = load_choices()
        return plan if last is None else last.apply(plan, self.catalog)

    def _picked(self, plan: RacePlan | None) -> None:
        if plan is not None and self.remember:
            save_choices(Choices.of_plan(plan))
        if plan is not None:
            self.run_worker(self.start_race(plan), name="start-race", exclusive=True)

    async def start_race(self, plan: RacePlan) -> None:
        self.plan = plan
        try:
            if self.player is not None:
                await self.player.start()
            else:
                await self.session.start(plan)
        except Exception as exc:  # could not start: never a blank screen; one line, exit 1
            self.start_error = f"could not start: {exc}"
            await self.stop_everything()
            self.exit(1)
            return
        self.race = RaceScreen(
            self.session, self.tick_interval, projector=self.projector, player=self.player
        )
        await self.push_screen(self.race)
        if plan.note:
            # plain text: "[app]" in a stack's name is not markup (it vanished once)
            self.notify(terminal(plan.note), timeout=12, markup=False)

    async def stop_everything(self) -> None:
        """Stop the load and every stack, once: a second caller (the unmount after `q`)
        waits for the first stop to end instead of leaving it half done, and the stop
        is shielded from the cancellation of whatever awaited it."""

        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self.session.stop())
        await asyncio.shield(self._stopping)

    async def action_quit(self) -> None:
        self.notify("stopping every stack…")
        await self.stop_everything()
        self.exit(0)

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        self.deliver_screenshot(filename, path)

    def deliver_screenshot(
        self, filename: str | None = None, path: str | None = None, time_format: str | None = None
    ) -> str | None:
        """An SVG of the current screen, from any screen and from the command palette.

        In a terminal it is written into `screenshot_dir` (Textual's own default is the
        downloads folder, which a server often lacks: "Failed to save screenshot"); in
        a browser (`stackrace web`) it is handed to the browser as a download.
        """
        if self.is_web:
            return super().deliver_screenshot(filename, path, time_format)
        directory = Path(path) if path else self.screenshot_dir
        try:
            directory.mkdir(parents=True, exist_ok=True)
            saved = self.save_screenshot(filename, str(directory), time_format)
        except OSError as exc:
            self.notify(f"screenshot not saved: {exc}", severity="error")
            return None
        self.notify(f"saved {saved}")
        return saved

    async def on_unmount(self) -> None:
        await self.stop_everything()


def exit_status(app: StackraceApp, rc: int) -> int:
    """The app's exit status: a crash is 70 with one line naming the crash log."""
    if app.crash is not None:
        print(crashlog.one_line("stackrace", app.crash, app.crash_log), file=sys.stderr)
        return crashlog.EXIT_INTERNAL
    if app.start_error is not None:
        print(f"stackrace: {terminal(' '.join(app.start_error.split()))}", file=sys.stderr)
        return 1
    return rc or (app.return_code or 0)
