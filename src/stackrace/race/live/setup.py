"""The app's race, made from its command line: `stackrace [OPTIONS]` → an `AppRace`.

Everything the app needs before a screen opens is decided here, headless: the settings
(a preset's, then the options given, merged as bench merges them), the URL targets, the
stacks made for your app (--app, --cmd), the engine and the stacks' source (or the
synthetic demo's), the picker's catalog and whether to show it, and what rides along
(a talk track, ghosts, a recorder). The UI receives the result and only shows it: as
harlequin's app receives a ready adapter, `tui.app.StackraceApp.for_race` takes an
`AppRace`, so no engine, recorder or demo is built in the UI package, and this module
(Textual-free, like all of race/) is unit-tested without a terminal.

A bad argument is an `AppSetupError` whose text is the one line the command prints.
The metrics exporter is not here: it is bound by the command (commands/app.py) before
anything starts, and handed to what runs the app.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec

from stackrace.base.errors import StackraceError
from stackrace.race.core.members import RaceParts, StackChoice, StackSource
from stackrace.race.core.plan import RacePlan
from stackrace.race.live.session import Session
from stackrace.settings.race_settings import BENCH_ONLY, RaceSettings, with_given

if TYPE_CHECKING:
    from stackrace.report.schema import Then
    from stackrace.stacks.catalogue import StackFile


class AppSetupError(StackraceError):
    """The command line asks for something that cannot start (said in one line)."""


@dataclass
class AppRace:
    """A session ready to show, and how to open it."""

    session: Session
    plan: RacePlan
    catalog: list[StackChoice]
    show_picker: bool
    drive: Callable[[], object] | None = None  # called at 4 Hz: steps the demo's engine
    projector: bool = False
    remember: bool = False  # the picker opens with, and saves, the last choices
    argv: list[str] = field(default_factory=list)  # the command line, for a crash log


def app_race(args: argparse.Namespace, parts: RaceParts | None = None) -> AppRace:
    """The race `stackrace ARGS` opens; `parts`: the engine and the stacks' source made
    elsewhere (`stackrace --cluster`). Raises AppSetupError."""
    session, plan, catalog, show_picker = build_session(args, parts)
    if getattr(args, "talk", None):
        from stackrace.race.live.talk import TalkError, load_talk

        try:
            session.play_talk(load_talk(args.talk))
        except TalkError as exc:
            raise AppSetupError(str(exc)) from None
    for ghost in getattr(args, "ghost", None) or []:
        from stackrace.race.playback.ghost import GhostError, load_ghost

        try:
            session.ghosts.append(load_ghost(ghost))
        except GhostError as exc:
            raise AppSetupError(str(exc)) from None
    if getattr(args, "record", None):
        from stackrace.race.playback.recording import Recorder

        session.listeners.append(Recorder(args.record))
    drive = None
    demo = bool(getattr(args, "demo", False))
    if demo:
        # the synthetic engine publishes a snapshot per step(): step it at the engine's pace
        from stackrace.race.live.demo import SyntheticEngine

        engine = session.engine
        assert isinstance(engine, SyntheticEngine)  # --demo made the session on it
        drive = engine.step
    return AppRace(
        session,
        plan,
        catalog,
        show_picker,
        drive=drive,
        projector=bool(getattr(args, "big", False)),
        remember=show_picker and not demo,
        argv=list(getattr(args, "argv", []) or []),
    )


def race_settings(args: argparse.Namespace) -> RaceSettings:
    """The race settings: a --preset's (if any), then the options given, merged as
    bench merges them; bench's own settings (its levels, durations, repeats) are not
    the app's: the app moves the load live from one starting level (`-c`)."""
    base = RaceSettings()
    preset = getattr(args, "preset", None)
    if preset:
        from stackrace.race.core.presets import load_preset
        from stackrace.stacks.catalogue import ConfigError

        try:
            base = load_preset(preset).settings
        except ConfigError as exc:
            raise AppSetupError(str(exc)) from None
    return with_given(base, args, skip=BENCH_ONLY)


def build_session(
    args: argparse.Namespace, parts: RaceParts | None = None
) -> tuple[Session, RacePlan, list[StackChoice], bool]:
    """The session, first plan and picker catalog for these command-line arguments,
    and whether the picker opens first."""
    from stackrace.race.core.urls import UrlError, check_paths, url_targets

    settings = race_settings(args)
    from stackrace.race.core.placement import cpus_problem

    cores = list(parts.cores) if parts is not None else sorted(os.sched_getaffinity(0))
    problem = cpus_problem(settings.cpus, cores, engine_here=parts is None)
    if problem:
        raise AppSetupError(problem)
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
    note = ""
    if own is not None and not settings.stacks:
        from stackrace.stacks.userapp import default_app_stacks, generated_names, left_out_note

        chosen, others = default_app_stacks(own)
        cmds = [n for n in generated_names(own) if own.generated[n] == "--cmd"]
        settings = msgspec.structs.replace(settings, stacks=chosen + cmds)
        if go and others:  # --go skips the picker, where the others would be seen
            note = left_out_note(chosen + cmds, others)
    plan = RacePlan(
        stacks=tuple(settings.stacks),
        urls=urls,
        settings=settings,
        concurrency=concurrency,
        rate=settings.rate,
        note=note,
    )
    if go and not plan.stacks and not urls:
        raise AppSetupError("--go needs stacks: --stacks A,B, a --preset, or --url")
    if go and own is not None:  # (the picker shows what is missing, and its fix)
        from stackrace.stacks.userapp import missing_servers

        missing = missing_servers(list(plan.stacks), own)
        if missing:
            raise AppSetupError(missing)
    if getattr(args, "demo", False):
        from stackrace.race.live.demo import CATALOG, demo_session

        return demo_session(), plan, list(CATALOG), not go

    from stackrace.engine.client import Engine
    from stackrace.engine.model import EngineSettings
    from stackrace.race.core.core import RaceCore

    engine_settings = EngineSettings(interval=0.25, timeout=plan.settings.timeout)
    source: StackSource | None
    if parts is not None:
        engine = parts.engine(engine_settings)
        source = parts.source
    else:
        source = _stacks_source(args, plan, own)
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


def _stacks_source(
    args: argparse.Namespace, plan: RacePlan, own: StackFile | None
) -> StackSource | None:
    """The stacks file's stacks, or your app's servers (--app) and --cmd stacks offered
    alone; None when the file cannot be read and only --url targets are raced."""
    from stackrace.race.core.stack_source import StacksFileSource
    from stackrace.stacks.catalogue import ConfigError

    stacks_file = getattr(args, "stacks_file", None)
    memory_max = plan.settings.memory_max
    try:
        if own is not None:
            from stackrace.stacks.userapp import default_app_stacks, generated_names

            return StacksFileSource(
                stacks_file,
                defs=own,
                memory_max=memory_max,
                offer=generated_names(own),
                defaults=plan.stacks or default_app_stacks(own)[0],
            )
        return StacksFileSource(stacks_file, memory_max=memory_max)
    except ConfigError:
        # only reached with --url targets (commands/app.py refuses a broken file otherwise)
        return None


def _own_stacks(args: argparse.Namespace, settings: RaceSettings) -> StackFile | None:
    """The stacks files' stacks with those made for this race (--app, --cmd), or None
    when there are none; AppSetupError (one line) when the app or a command is not usable."""
    if not getattr(args, "app", None) and not getattr(args, "cmd", None):
        return None
    from stackrace.settings import scenario
    from stackrace.stacks import userapp
    from stackrace.stacks.catalogue import ConfigError, load_stacks

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
    from stackrace.race.core.presets import load_preset

    return load_preset(preset).then()  # (read once already by race_settings: it is valid)
