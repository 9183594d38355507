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

One pass, each thing decided once and handed on: the preset is read once (its settings,
its file for the names it may give, its experiment for the panes); the run's stacks are
resolved once (stacks/resolved.py `ResolvedRun.for_race`: the catalogue the command
read, your app's stacks, the picker's offer and the stacks raced when none are named),
and the source, the checks before the screen opens and the notice all take that result.

Every import is at the top: this module is imported only to open the app, and the few
it needs for one option alone (the demo's, your app's, a recorder's) cost ~5 ms there.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from stackrace.base.errors import StackraceError
from stackrace.engine.client import Engine
from stackrace.engine.model import EngineSettings
from stackrace.race.core import streams
from stackrace.race.core.core import RaceCore
from stackrace.race.core.members import RaceParts, StackChoice, StackSource
from stackrace.race.core.placement import cpus_problem
from stackrace.race.core.plan import RacePlan
from stackrace.race.core.presets import load_preset
from stackrace.race.core.stack_source import DEFAULT_STACKS, StacksFileSource
from stackrace.race.core.urls import UrlError, check_paths, unsampled_slo, url_targets
from stackrace.race.live.demo import CATALOG, SyntheticEngine, demo_session
from stackrace.race.live.session import Session
from stackrace.race.live.session_recorder import Recorder
from stackrace.race.live.talk import TalkError, load_talk
from stackrace.race.playback.ghost import GhostError, load_ghost
from stackrace.report.write import check_output_paths
from stackrace.settings.parsers import COMMAND_LINE
from stackrace.settings.race_settings import RaceSettings, stacks_named_in, with_options
from stackrace.settings.scenario import ScenarioError
from stackrace.stacks.app_spec import AppError, YourApp
from stackrace.stacks.catalogue import SHIPPED, StackFile, announcement
from stackrace.stacks.definition import ConfigError
from stackrace.stacks.resolved import RaceStacks, ResolvedRun, resolve_run
from stackrace.stacks.variants import resolve


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
    # the stacks files this race's stacks come from, when one is not the package's own
    # (the same lines every command prints first); none with only --url targets
    source = session.core.source
    defs = source.defs if isinstance(source, StacksFileSource) else None
    notice = ""
    if isinstance(defs, StackFile) and any(origin != SHIPPED for _, origin, _ in defs.files):
        notice = "\n".join(announcement(defs))
    try:  # what rides along, each read before the screen opens: one line, not a toast
        if o.talk:
            session.play_talk(load_talk(o.talk))
        session.ghosts.extend(load_ghost(ghost) for ghost in o.ghosts)
    except (TalkError, GhostError) as exc:
        raise AppSetupError(str(exc)) from None
    if o.record:
        problem = _record_problem(o.record)
        if problem:  # before the screen opens: one line, not a toast over a blank screen
            raise AppSetupError(problem)
        session.listeners.append(Recorder(o.record))
    drive = None
    if o.demo:
        # the synthetic engine publishes a snapshot per step(): step it at the engine's pace
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


def _record_problem(record: str) -> str | None:
    """Why --record cannot be written, or None (its directory is made, as the recorder
    would make it)."""
    parent = Path(record).expanduser().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"--record {record}: cannot make {parent}: {exc.strerror or exc}"
    return check_output_paths({"--record": record})


def build_session(
    o: AppOptions, parts: RaceParts | None = None, run_stacks: ResolvedRun | None = None
) -> tuple[Session, RacePlan, list[StackChoice], bool]:
    """The session, first plan and picker catalog for these command-line arguments,
    and whether the picker opens first. The catalogue is read once (`run_stacks`, or
    here when None) and the run's stacks resolved once, for the plan, the source and
    the checks alike."""
    try:  # read once: its settings, its file, its experiment
        preset = load_preset(o.preset) if o.preset else None
    except ConfigError as exc:
        raise AppSetupError(str(exc)) from None
    # the settings: the preset's, then the options given, merged as bench merges them;
    # bench's own (its levels, durations, repeats) are not the app's: the app moves the
    # load live from one starting level (`-c`)
    base = preset.settings if preset is not None else RaceSettings()
    settings = with_options(base, dict(o.given), app_given=bool(o.your_app.app))
    # where the race's stacks were written: a file may not name an executable
    # (stacks.tunables.check_override)
    preset_file = Path(preset.file) if preset is not None else None
    named_in = stacks_named_in("stacks" in o.given, preset_file, None)
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
    one = settings.concurrency_levels if preset is not None and settings.rate is None else []
    concurrency = o.concurrency or (one[0] if len(one) == 1 else 10)
    if run_stacks is None and not o.demo:
        run_stacks = resolve_run(o.stacks_file)
    stacks: RaceStacks | None = None
    if run_stacks is not None:
        try:  # the stacks files' stacks with those made for this race (--app, --cmd)
            stacks = run_stacks.for_race(o.your_app, settings)
        except (AppError, ScenarioError, ConfigError) as exc:
            raise AppSetupError(str(exc)) from None
    made = stacks is not None and stacks.offer is not None
    note = ""
    if stacks is not None and made and not settings.stacks:
        settings = msgspec.structs.replace(settings, stacks=stacks.chosen)
        if go:  # --go skips the picker, where the others would be seen
            note = stacks.left_out
    plan = RacePlan(
        stacks=tuple(settings.stacks),
        urls=urls,
        settings=settings,
        concurrency=concurrency,
        rate=settings.rate,
        note=note,
    )
    if stacks is not None and parts is None and not o.demo:  # (a demo starts none)
        # the stacks named, checked before the app opens as every command checks them:
        # with --go, a stack that a ./stacks.toml not trusted yet adds is refused in the
        # line that says how to trust it (stacks.catalogue); a preset's are a file's
        # words, and may not name an executable (stacks.tunables.check_override); the
        # command line's and the picker's are the user's own
        bases = [ref.partition(":")[0] for ref in plan.stacks]
        refused = [stacks.defs.untrusted[b] for b in bases if b in stacks.defs.untrusted]
        if go and refused:
            raise AppSetupError(refused[0])
        try:
            for ref in plan.stacks if named_in != COMMAND_LINE else ():
                resolve(ref, stacks.defs, named_in=named_in)
        except ConfigError as exc:
            raise AppSetupError(str(exc)) from None
    if go and not plan.stacks and not urls:
        raise AppSetupError("--go needs stacks: --stacks A,B, a --preset, or --url")
    h2 = streams.h2_speakers(plan.stacks, settings.http2)
    conflict = streams.h2_conflict(h2, settings.keepalive, settings.clients)
    if conflict:  # the one rule of every front end, before the screen opens
        raise AppSetupError(conflict)
    if go and stacks is not None and stacks.missing:  # (the picker shows it, and its fix)
        raise AppSetupError(stacks.missing)
    then = preset.then() if preset is not None else None
    if o.demo:
        demo = demo_session()
        demo.then = then  # a preset's experiment beside the demo's panes too
        return demo, plan, list(CATALOG), not go

    engine_settings = EngineSettings(interval=0.25, timeout=plan.settings.timeout)
    source: StackSource | None = None
    if parts is not None:
        engine = parts.engine(engine_settings)
        source = parts.source
    else:
        if stacks is not None:  # (None: the file cannot be read, only --url targets race)
            source = StacksFileSource(
                o.stacks_file,
                defs=stacks.defs,
                memory_max=plan.settings.memory_max,
                # your app's servers and --cmd stacks offered alone, those raced chosen
                offer=stacks.offer,
                defaults=plan.stacks if made else DEFAULT_STACKS,
            )
        engine = Engine(engine_settings, per_target=True, allow_remote=o.allow_remote)
    catalog = source.catalog() if source is not None else []
    if go and source is not None:
        known = {c.id for c in catalog}
        unknown = [s for s in plan.stacks if s.partition(":")[0] not in known]
        if unknown:
            raise AppSetupError(_unknown_stack(unknown[0], sorted(known)))
    session = Session(RaceCore(engine, source, plan.settings))
    session.then = then
    # with only URL targets and nothing to pick, go straight to the race
    show_picker = not go and (bool(catalog) or not urls)
    return session, plan, catalog, show_picker


def _unknown_stack(ref: str, names: list[str]) -> str:
    """The one line for a stack named that none is: your app's stacks when it asked for
    one of them (`…[app]`: `stackrace stacks` does not list them), else the nearest
    names. The name is the user's text: shown with repr, never raw."""
    base = ref.partition(":")[0]
    if base.endswith("[app]"):
        apps = [n for n in names if n.endswith("[app]")]
        known = f"your app's: {', '.join(apps)}" if apps else "no stack of your app here"
        return f"no stack {ref!r}: {known}"
    near = difflib.get_close_matches(base, names, n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(near)}?)" if near else ""
    return f"no stack {ref!r} in the stacks file{hint}; `stackrace stacks` lists them"
