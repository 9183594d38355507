"""The app's race, made from its command line: `stackrace [OPTIONS]` → an `AppRace`.

Everything the app needs before a screen opens is decided here, headless: the settings
(a preset's, then the options given, merged as bench merges them), the URL targets, the
stacks made for your app (--app, --cmd), the engine and the stacks' source (or the
synthetic demo's), the picker's catalog and whether to show it, and what rides along
(a talk track, ghosts, a recorder). The UI receives the result and only shows it: as
harlequin's app receives a ready adapter, `tui.app.StackraceApp.for_race` takes an
`AppRace`, so no engine, recorder or demo is built in the UI package, and this module
(Textual-free, like all of race/) is unit-tested without a terminal.

It takes the command line typed (`AppOptions`, read by commands/app_args.py): nothing
here knows argparse. A bad argument is an `AppSetupError` whose text is the one line
the command prints.
The metrics exporter is not here: it is bound by the command (commands/app.py) before
anything starts, and handed to what runs the app.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from stackrace.base.errors import StackraceError
from stackrace.race.core.members import RaceParts, StackChoice, StackSource
from stackrace.race.core.plan import RacePlan
from stackrace.race.live.session import Session
from stackrace.settings.race_settings import RaceSettings, stacks_named_in, with_options
from stackrace.stacks.app_spec import YourApp

if TYPE_CHECKING:
    from stackrace.report.schema import Then
    from stackrace.stacks.catalogue import StackFile
    from stackrace.stacks.resolved import ResolvedRun


class AppSetupError(StackraceError):
    """The command line asks for something that cannot start (said in one line)."""

    exit_code = 2


@dataclass(frozen=True)
class AppOptions:
    """What `stackrace [OPTIONS]` asks for, typed."""

    # the race settings given (by field name; bench's own levels left out), over a preset's
    given: Mapping[str, Any] = field(default_factory=dict)
    preset: str | None = None
    go: bool = False  # straight to the race, no picker
    concurrency: int | None = None  # the starting level (10 when not given)
    demo: bool = False
    urls: tuple[str, ...] = ()  # --url [NAME=]URL
    pids: tuple[int, ...] = ()  # --pid, the Nth with the Nth --url
    allow_remote: bool = False
    stacks_file: str | None = None
    your_app: YourApp = field(default_factory=YourApp)
    talk: str | None = None
    ghosts: tuple[str, ...] = ()
    record: str | None = None
    big: bool = False
    argv: tuple[str, ...] = ()  # the command line, for a crash log


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
    # shown as the app opens: the stacks files read, when one is not the package's own
    notice: str = ""


def app_race(
    o: AppOptions, parts: RaceParts | None = None, run_stacks: ResolvedRun | None = None
) -> AppRace:
    """The race `stackrace ARGS` opens; `parts`: the engine and the stacks' source made
    elsewhere (`stackrace --cluster`); `run_stacks`: the catalogue the command read
    (stacks/resolved.py; None: read here, once). Raises AppSetupError."""
    session, plan, catalog, show_picker = build_session(o, parts, run_stacks)
    notice = _stacks_files_notice(session)
    if o.talk:
        from stackrace.race.live.talk import TalkError, load_talk

        try:
            session.play_talk(load_talk(o.talk))
        except TalkError as exc:
            raise AppSetupError(str(exc)) from None
    for ghost in o.ghosts:
        from stackrace.race.playback.ghost import GhostError, load_ghost

        try:
            session.ghosts.append(load_ghost(ghost))
        except GhostError as exc:
            raise AppSetupError(str(exc)) from None
    if o.record:
        from stackrace.race.live.session_recorder import Recorder

        problem = _record_problem(o.record)
        if problem:  # before the screen opens: one line, not a toast over a blank screen
            raise AppSetupError(problem)
        session.listeners.append(Recorder(o.record))
    drive = None
    if o.demo:
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
        projector=o.big,
        remember=show_picker and not o.demo,
        argv=list(o.argv),
        notice=notice,
    )


def _stacks_files_notice(session: Session) -> str:
    """The stacks files this race's stacks come from, when one is not the package's own
    (the same lines every command prints first: stacks.catalogue.announcement); "" otherwise."""
    from stackrace.race.core.stack_source import StacksFileSource
    from stackrace.stacks.catalogue import SHIPPED, StackFile, announcement

    source = session.core.source
    if not isinstance(source, StacksFileSource) or not isinstance(source.defs, StackFile):
        return ""
    if all(origin == SHIPPED for _, origin, _ in source.defs.files):
        return ""
    return "\n".join(announcement(source.defs))


def _record_problem(record: str) -> str | None:
    """Why --record cannot be written, or None (its directory is made, as the recorder
    would make it)."""
    from pathlib import Path

    from stackrace.report.write import check_output_paths

    parent = Path(record).expanduser().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"--record {record}: cannot make {parent}: {exc.strerror or exc}"
    return check_output_paths({"--record": record})


def race_settings(o: AppOptions) -> RaceSettings:
    """The race settings: a --preset's (if any), then the options given, merged as
    bench merges them; bench's own settings (its levels, durations, repeats) are not
    the app's: the app moves the load live from one starting level (`-c`)."""
    base = RaceSettings()
    preset = o.preset
    if preset:
        from stackrace.race.core.presets import load_preset
        from stackrace.stacks.definition import ConfigError

        try:
            base = load_preset(preset).settings
        except ConfigError as exc:
            raise AppSetupError(str(exc)) from None
    return with_options(base, dict(o.given), app_given=bool(o.your_app.app))


def build_session(
    o: AppOptions, parts: RaceParts | None = None, run_stacks: ResolvedRun | None = None
) -> tuple[Session, RacePlan, list[StackChoice], bool]:
    """The session, first plan and picker catalog for these command-line arguments,
    and whether the picker opens first. The catalogue is read once (`run_stacks`, or
    here when None) and handed to your app's stacks and the race's source."""
    from stackrace.race.core.urls import UrlError, check_paths, unsampled_slo, url_targets

    settings = race_settings(o)
    from stackrace.race.core.placement import cpus_problem

    cores = list(parts.cores) if parts is not None else sorted(os.sched_getaffinity(0))
    problem = cpus_problem(settings.cpus, cores, engine_here=parts is None)
    if problem:
        raise AppSetupError(problem)
    try:
        urls = tuple(
            url_targets(list(o.urls) or None, list(o.pids) or None, allow_remote=o.allow_remote)
        )
        check_paths(urls, settings.own_requests)
    except UrlError as exc:
        raise AppSetupError(str(exc)) from None
    problem = unsampled_slo(settings.slo, urls)  # as bench --url: never met unsampled
    if problem:
        raise AppSetupError(problem)
    go = o.go
    # a preset of one level (h1-vs-h2's 100: its split and claims are at 100) opens there
    one = settings.concurrency_levels if o.preset and settings.rate is None else []
    concurrency = o.concurrency or (one[0] if len(one) == 1 else 10)
    if run_stacks is None and not o.demo:
        # the catalogue's readers are imported where it is read: a demo reads none,
        # and it keeps start-up fast (as every import of this module's functions)
        from stackrace.stacks.resolved import resolve_run

        run_stacks = resolve_run(o.stacks_file)
    own = _own_stacks(o, settings, run_stacks) if run_stacks is not None else None
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
    from stackrace.race.core import streams

    h2 = streams.h2_speakers(plan.stacks, settings.http2)
    conflict = streams.h2_conflict(h2, settings.keepalive, settings.clients)
    if conflict:  # the one rule of every front end, before the screen opens
        raise AppSetupError(conflict)
    if go and own is not None:  # (the picker shows what is missing, and its fix)
        from stackrace.stacks.userapp import missing_servers

        missing = missing_servers(list(plan.stacks), own)
        if missing:
            raise AppSetupError(missing)
    if o.demo:
        from stackrace.race.live.demo import CATALOG, demo_session

        demo = demo_session()
        demo.then = _then_of(o.preset)  # a preset's experiment beside the demo's panes too
        return demo, plan, list(CATALOG), not go

    from stackrace.engine.client import Engine
    from stackrace.engine.model import EngineSettings
    from stackrace.race.core.core import RaceCore

    engine_settings = EngineSettings(interval=0.25, timeout=plan.settings.timeout)
    source: StackSource | None
    if parts is not None:
        engine = parts.engine(engine_settings)
        source = parts.source
    else:
        assert run_stacks is not None  # read above: not a demo
        source = _stacks_source(o, plan, own, run_stacks)
        engine = Engine(engine_settings, per_target=True, allow_remote=o.allow_remote)
    catalog = source.catalog() if source is not None else []
    if go and source is not None:
        known = {c.id for c in catalog}
        unknown = [s for s in plan.stacks if s.partition(":")[0] not in known]
        if unknown:
            raise AppSetupError(f"no stack {unknown[0]!r} in the stacks file")
        _refuse_untrusted(plan.stacks, source)
    _check_named_in_file(o, plan, source)
    session = Session(RaceCore(engine, source, plan.settings))
    session.then = _then_of(o.preset)
    # with only URL targets and nothing to pick, go straight to the race
    show_picker = not go and (bool(catalog) or not urls)
    return session, plan, catalog, show_picker


def _refuse_untrusted(names: Sequence[str], source: StackSource) -> None:
    """A stack that a ./stacks.toml not trusted yet adds is refused before the app
    opens, in the line that says how to trust it (stacks.catalogue), as every command
    refuses it."""
    from stackrace.race.core.stack_source import StacksFileSource
    from stackrace.stacks.catalogue import StackFile

    if not isinstance(source, StacksFileSource) or not isinstance(source.defs, StackFile):
        return
    for ref in names:
        line = source.defs.untrusted.get(ref.partition(":")[0])
        if line:
            raise AppSetupError(line)


def _check_named_in_file(o: AppOptions, plan: RacePlan, source: StackSource | None) -> None:
    """A preset's stacks are a file's words: checked as such before anything starts (it
    may not name an executable: stacks.variants.resolve); the command line's and the picker's
    are the user's own."""
    from stackrace.race.core.stack_source import StacksFileSource
    from stackrace.settings.options import COMMAND_LINE
    from stackrace.stacks.definition import ConfigError
    from stackrace.stacks.variants import resolve

    preset = o.preset
    if not preset or not isinstance(source, StacksFileSource):
        return
    from stackrace.race.core.presets import preset_path

    named_in = stacks_named_in("stacks" in o.given, preset_path(preset), None)
    if named_in == COMMAND_LINE:
        return
    for ref in plan.stacks:
        try:
            resolve(ref, source.defs, named_in=named_in)
        except ConfigError as exc:
            raise AppSetupError(str(exc)) from None


def _stacks_source(
    o: AppOptions, plan: RacePlan, own: StackFile | None, run_stacks: ResolvedRun
) -> StackSource | None:
    """The stacks file's stacks, or your app's servers (--app) and --cmd stacks offered
    alone; None when the file cannot be read and only --url targets are raced."""
    from stackrace.race.core.stack_source import StacksFileSource
    from stackrace.stacks.definition import ConfigError

    stacks_file = o.stacks_file
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
        return StacksFileSource(stacks_file, defs=run_stacks.stacks(), memory_max=memory_max)
    except ConfigError:
        # only reached with --url targets (commands/app.py refuses a broken file otherwise)
        return None


def _own_stacks(o: AppOptions, settings: RaceSettings, run_stacks: ResolvedRun) -> StackFile | None:
    """The stacks files' stacks with those made for this race (--app, --cmd), or None
    when there are none; AppSetupError (one line) when the app or a command is not usable."""
    if not o.your_app.given:
        return None
    from stackrace.settings import scenario
    from stackrace.stacks.app_spec import AppError
    from stackrace.stacks.definition import ConfigError

    try:
        if settings.own_requests:
            settings.request_kinds()  # checked before anything starts
        return run_stacks.with_your_app(o.your_app, settings)
    except (AppError, scenario.ScenarioError, ConfigError) as exc:
        raise AppSetupError(str(exc)) from None


def _then_of(preset: str | None) -> Then | None:
    """The classic experiment a preset replays (its figures and claims), or None."""
    if not preset:
        return None
    from stackrace.race.core.presets import load_preset

    return load_preset(preset).then()  # (read once already by race_settings: it is valid)
