"""`StackraceApp`: the picker, then the race. `run_app(args)` is what `stackrace` calls."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from textual.app import App
from textual.binding import Binding, BindingType

from stackrace.race.core import RaceParts, StackChoice, StackSource
from stackrace.race.session import RacePlan, Session
from stackrace.tui.picker import PickerScreen
from stackrace.tui.race import RaceScreen


class StackraceApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "stackrace"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "quit", "quit", show=False, priority=True)
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
    ) -> None:
        super().__init__()
        self.session = session
        self.plan = plan
        self.catalog = catalog
        self.show_picker = show_picker
        self.tick_interval = tick_interval
        self.screenshot_dir = Path(screenshot_dir)
        self.race: RaceScreen | None = None
        self._stopped = False
        self.drive = drive  # called at 4 Hz: steps a synthetic engine (demo mode)

    async def on_mount(self) -> None:
        self.theme = "textual-dark"
        if self.drive is not None:
            self.set_interval(0.25, self.drive, name="drive")
        if self.show_picker:
            self.push_screen(PickerScreen(self.catalog, self.plan), callback=self._picked)
        else:
            await self.start_race(self.plan)

    def _picked(self, plan: RacePlan | None) -> None:
        if plan is not None:
            self.run_worker(self.start_race(plan), name="start-race", exclusive=True)

    async def start_race(self, plan: RacePlan) -> None:
        self.plan = plan
        try:
            await self.session.start(plan)
        except Exception as exc:  # the engine could not start: say so, do not hang
            self.notify(f"could not start: {exc}", severity="error", timeout=10)
            return
        self.race = RaceScreen(self.session, self.tick_interval)
        await self.push_screen(self.race)

    async def stop_everything(self) -> None:
        if not self._stopped:
            self._stopped = True
            await self.session.stop()

    async def action_quit(self) -> None:
        self.notify("stopping every stack…")
        await self.stop_everything()
        self.exit(0)

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        self.screenshot_dir.mkdir(parents=True, exist_ok=True)
        saved = self.save_screenshot(filename, path or str(self.screenshot_dir))
        self.notify(f"saved {saved}")

    async def on_unmount(self) -> None:
        await self.stop_everything()


def build_session(
    args: argparse.Namespace, parts: RaceParts | None = None
) -> tuple[Session, RacePlan, list[StackChoice], bool]:
    """The session, first plan and picker catalog for these command-line arguments;
    `parts`: the engine and the stacks' source made elsewhere (`stackrace --cluster`)."""
    from stackrace.race.urls import UrlTarget

    urls = tuple(
        UrlTarget(url, pid)
        for url, pid in zip(
            getattr(args, "url", None) or [],
            [*(getattr(args, "pid", None) or []), *[None] * 64],
            strict=False,
        )
    )
    plan = RacePlan(urls=urls, concurrency=getattr(args, "concurrency", None) or 10)
    if getattr(args, "demo", False):
        from stackrace.race.demo import CATALOG, demo_session

        return demo_session(), plan, list(CATALOG), True

    from stackrace.config import ConfigError
    from stackrace.engine.client import Engine
    from stackrace.engine.model import EngineSettings
    from stackrace.race.core import RaceCore
    from stackrace.race.stacks import StacksSource

    settings = EngineSettings(interval=0.25, timeout=plan.settings.timeout)
    source: StackSource | None
    if parts is not None:
        engine = parts.engine(settings)
        source = parts.source
    else:
        try:
            source = StacksSource(getattr(args, "stacks_file", None))
        except ConfigError:
            # only reached with --url targets (commands/app.py refuses a broken file otherwise)
            source = None
        remote = getattr(args, "allow_remote", False)
        engine = Engine(settings, per_target=True, allow_remote=remote)
    catalog = source.catalog() if source is not None else []
    session = Session(RaceCore(engine, source, plan.settings))
    # with only URL targets and nothing to pick, go straight to the race
    show_picker = bool(catalog) or not urls
    return session, plan, catalog, show_picker


def run_app(args: argparse.Namespace, parts: RaceParts | None = None) -> int:
    session, plan, catalog, show_picker = build_session(args, parts)
    drive = None
    if getattr(args, "demo", False):
        # the synthetic engine publishes a snapshot per step(): step it at the engine's pace
        drive = session.engine.step
    app = StackraceApp(session, plan, catalog, show_picker=show_picker, drive=drive)
    exporter = getattr(args, "metrics_exporter", None)  # --metrics (commands/app.py)
    if exporter is not None:
        exporter.follow_core(session.core)
        return exporter.run_beside(app.run_async) or 0
    return app.run() or 0
