"""`StackraceApp`: the picker, then the race. `run_app(args)` is what `stackrace` calls."""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual.app import App
from textual.binding import Binding, BindingType

from stackrace.race.members import RaceParts, StackChoice, StackSource
from stackrace.race.replay import ReplayPlayer
from stackrace.race.session import RacePlan, Session
from stackrace.race_settings import RaceSettings
from stackrace.tui.picker import PickerScreen
from stackrace.tui.race import RaceScreen

if TYPE_CHECKING:
    from stackrace.report.schema import Then


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
    ) -> None:
        super().__init__()
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

    def _handle_exception(self, error: Exception) -> None:
        """A bug of ours while the app runs: the details go to a crash log, and the app
        exits with status 70 and one line instead of a screen-wide traceback (Textual's
        own handling exits with 1, which the shell saw as 0 through `run() or 0`).
        Textual's handling still runs, so Pilot tests see the exception re-raised and
        the screens unmount (which stops every stack)."""
        from stackrace import crashlog

        if self.crash is None:
            self.crash = error
            self.crash_log = crashlog.record(error, self.argv)
        super()._handle_exception(error)
        self._exit_renderables.clear()  # the traceback is in the crash log
        self._return_code = crashlog.EXIT_INTERNAL

    async def on_mount(self) -> None:
        self.theme = "textual-dark"
        if self.drive is not None:
            self.set_interval(0.25, self.drive, name="drive")
        if self.session.synthetic:
            self.title = "stackrace — SYNTHETIC DEMO (no servers, no load)"
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
        import msgspec

        from stackrace.race.choices import load_choices

        last = load_choices()
        if last is None or plan.stacks:
            return plan
        known = {c.id for c in self.catalog if c.available}
        stacks = tuple(s for s in last.stacks if s.partition(":")[0] in known)
        settings = msgspec.structs.replace(
            plan.settings, workload=last.workload, io_ms=last.io_ms, queries=last.queries
        )
        return RacePlan(
            stacks=stacks,
            urls=plan.urls,
            settings=settings,
            concurrency=last.level,
            rate=float(last.level) if last.rate_mode else None,
        )

    def _picked(self, plan: RacePlan | None) -> None:
        if plan is not None and self.remember:
            from stackrace.race.choices import Choices, save_choices

            s = plan.settings
            save_choices(
                Choices(
                    stacks=list(plan.stacks),
                    workload=s.workload,
                    io_ms=s.io_ms,
                    queries=s.queries,
                    rate_mode=plan.rate is not None,
                    level=plan.concurrency,
                )
            )
        if plan is not None:
            self.run_worker(self.start_race(plan), name="start-race", exclusive=True)

    async def start_race(self, plan: RacePlan) -> None:
        self.plan = plan
        try:
            if self.player is not None:
                await self.player.start()
            else:
                await self.session.start(plan)
        except Exception as exc:  # the engine could not start: say so, do not hang
            self.notify(f"could not start: {exc}", severity="error", timeout=10)
            return
        self.race = RaceScreen(self.session, self.tick_interval, projector=self.projector)
        await self.push_screen(self.race)

    async def stop_everything(self) -> None:
        """Stop the load and every stack, once: a second caller (the unmount after `q`)
        waits for the first stop to end instead of leaving it half done, and the stop
        is shielded from the cancellation of whatever awaited it."""
        import asyncio

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


class AppSetupError(Exception):
    """The command line asks for something that cannot start (said in one line)."""


def race_settings(args: argparse.Namespace) -> RaceSettings:
    """The race settings: a --preset's (if any), then the options given."""
    import msgspec

    from stackrace.race_settings import given

    base = RaceSettings()
    preset = getattr(args, "preset", None)
    if preset:
        from stackrace.config import ConfigError
        from stackrace.presets import load_preset

        try:
            base = load_preset(preset).settings
        except ConfigError as exc:
            raise AppSetupError(str(exc)) from None
    from stackrace.tui.args import BENCH_ONLY

    # bench's own settings are not app options; `-c` here is the starting level (an int),
    # not bench's list of levels, though it has the same name
    changes = {k: v for k, v in given(args).items() if k not in BENCH_ONLY}
    if "stacks" in changes:
        changes["stacks"] = [s for ref in changes["stacks"] for s in ref.split(",") if s]
    settings = msgspec.structs.replace(base, **changes)
    if getattr(args, "app", None) and not settings.own_requests:
        settings = msgspec.structs.replace(settings, paths=["/"])  # your app's own root
    return settings


def build_session(
    args: argparse.Namespace, parts: RaceParts | None = None
) -> tuple[Session, RacePlan, list[StackChoice], bool]:
    """The session, first plan and picker catalog for these command-line arguments;
    `parts`: the engine and the stacks' source made elsewhere (`stackrace --cluster`)."""
    from stackrace.race.urls import UrlError, check_paths, url_targets

    settings = race_settings(args)
    try:
        urls = tuple(
            url_targets(
                getattr(args, "url", None),
                getattr(args, "pid", None),
                allow_remote=getattr(args, "allow_remote", False),
            )
        )
        check_paths(urls, settings.own_requests)
    except UrlError as exc:
        raise AppSetupError(str(exc)) from None
    go = bool(getattr(args, "go", False))
    concurrency = getattr(args, "concurrency", None) or 10
    own = _own_stacks(args, settings) if not getattr(args, "demo", False) else None
    if own is not None and not settings.stacks:
        import msgspec

        from stackrace.userapp import default_app_stacks, generated_names

        chosen, _ = default_app_stacks(own)
        cmds = [n for n in generated_names(own) if own.generated[n] == "--cmd"]
        settings = msgspec.structs.replace(settings, stacks=chosen + cmds)
    plan = RacePlan(
        stacks=tuple(settings.stacks),
        urls=urls,
        settings=settings,
        concurrency=concurrency,
        rate=settings.rate,
    )
    if go and not plan.stacks and not urls:
        raise AppSetupError("--go needs stacks: --stacks A,B, a --preset, or --url")
    if getattr(args, "demo", False):
        from stackrace.race.demo import CATALOG, demo_session

        return demo_session(), plan, list(CATALOG), not go

    from stackrace.config import ConfigError
    from stackrace.engine.client import Engine
    from stackrace.engine.model import EngineSettings
    from stackrace.race.core import RaceCore
    from stackrace.race.stacks import StacksFileSource

    engine_settings = EngineSettings(interval=0.25, timeout=plan.settings.timeout)
    source: StackSource | None
    if parts is not None:
        engine = parts.engine(engine_settings)
        source = parts.source
    else:
        try:
            if own is not None:  # your app's servers (--app) and --cmd stacks, offered alone
                from stackrace.userapp import default_app_stacks, generated_names

                source = StacksFileSource(
                    getattr(args, "stacks_file", None),
                    defs=own,
                    memory_max=settings.memory_max,
                    offer=generated_names(own),
                    defaults=plan.stacks or default_app_stacks(own)[0],
                )
            else:
                source = StacksFileSource(
                    getattr(args, "stacks_file", None), memory_max=settings.memory_max
                )
        except ConfigError:
            # only reached with --url targets (commands/app.py refuses a broken file otherwise)
            source = None
        remote = getattr(args, "allow_remote", False)
        engine = Engine(engine_settings, per_target=True, allow_remote=remote)
    catalog = source.catalog() if source is not None else []
    if go and source is not None:
        known = {c.id for c in catalog}
        unknown = [s for s in plan.stacks if s.partition(":")[0] not in known]
        if unknown:
            raise AppSetupError(f"no stack {unknown[0]!r} in the stacks file")
    session = Session(RaceCore(engine, source, plan.settings))
    session.then = _then_of(getattr(args, "preset", None))
    # with only URL targets and nothing to pick, go straight to the race
    show_picker = not go and (bool(catalog) or not urls)
    return session, plan, catalog, show_picker


def _own_stacks(args: argparse.Namespace, settings: RaceSettings):  # -> StackFile | None
    """The stacks files' stacks with those made for this race (--app, --cmd), or None
    when there are none; AppSetupError (one line) when the app or a command is not usable."""
    if not getattr(args, "app", None) and not getattr(args, "cmd", None):
        return None
    from stackrace import scenario, userapp
    from stackrace.config import ConfigError, load_stacks

    try:
        if settings.own_requests:
            settings.request_kinds()  # checked before anything starts
        return userapp.with_run_stacks(
            load_stacks(getattr(args, "stacks_file", None)), args, settings
        )
    except (userapp.AppError, scenario.ScenarioError, ConfigError) as exc:
        raise AppSetupError(str(exc)) from None


def _then_of(preset: str | None) -> Then | None:
    """The classic experiment a preset replays (its figures and claims), or None."""
    if not preset:
        return None
    from stackrace.presets import load_preset

    return load_preset(preset).then()  # (read once already by race_settings: it is valid)


def make_app(args: argparse.Namespace, parts: RaceParts | None = None) -> StackraceApp:
    """The app for these command-line arguments, ready to run: what `stackrace` runs,
    and what the walkthrough tests open with Pilot. A bad argument is a AppSetupError."""
    session, plan, catalog, show_picker = build_session(args, parts)
    if getattr(args, "talk", None):
        from stackrace.race.talk import TalkError, load_talk

        try:
            session.play_talk(load_talk(args.talk))
        except TalkError as exc:
            raise AppSetupError(str(exc)) from None
    for ghost in getattr(args, "ghost", None) or []:
        from stackrace.race.ghost import GhostError, load_ghost

        try:
            session.ghosts.append(load_ghost(ghost))
        except GhostError as exc:
            raise AppSetupError(str(exc)) from None
    if getattr(args, "record", None):
        from stackrace.race.recording import Recorder

        session.listeners.append(Recorder(args.record))
    drive = None
    if getattr(args, "demo", False):
        # the synthetic engine publishes a snapshot per step(): step it at the engine's pace
        from stackrace.race.demo import SyntheticEngine

        engine = session.engine
        assert isinstance(engine, SyntheticEngine)  # --demo made the session on it (above)
        drive = engine.step
    app = StackraceApp(
        session,
        plan,
        catalog,
        show_picker=show_picker,
        drive=drive,
        projector=bool(getattr(args, "big", False)),
        remember=show_picker and not getattr(args, "demo", False),
    )
    app.argv = list(getattr(args, "argv", []) or [])
    return app


def run_app(args: argparse.Namespace, parts: RaceParts | None = None) -> int:
    import sys

    try:
        app = make_app(args, parts)
    except AppSetupError as exc:
        print(f"stackrace: {exc}", file=sys.stderr)
        return 2
    exporter = getattr(args, "metrics_exporter", None)  # --metrics (commands/app.py)
    if exporter is not None:
        exporter.follow_core(app.session.core)
        rc = exporter.run_beside(app.run_async) or 0
    else:
        rc = app.run() or 0
    return exit_status(app, rc)


def exit_status(app: StackraceApp, rc: int) -> int:
    """The app's exit status: a crash is 70 with one line naming the crash log."""
    import sys

    from stackrace import crashlog

    if app.crash is not None:
        print(crashlog.one_line("stackrace", app.crash, app.crash_log), file=sys.stderr)
        return crashlog.EXIT_INTERNAL
    return rc or (app.return_code or 0)
