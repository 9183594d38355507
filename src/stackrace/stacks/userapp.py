"""Your app on every server, and your commands: the stacks made for one run.

    stackrace --app myproject.wsgi:application          # or: --app main:app, --app path/app.py:app
    stackrace bench --app examples/flask_app:app --path /:3 --path /slow:1

A shipped server block that can serve any app carries an app template
(`[stacks.NAME.app]` in stacks.toml: its interface and command line, with {app_target}
for module:attr). `app_stacks` makes, for every template of the app's interface, a
stack named `NAME[app]` from the block and its template: the block's conventions (one
worker, keep-alive, no access log, loopback), its tunables (so `gunicorn-sync[app]:
workers=4` works), the template's command. The templates are declared once, beside the
blocks they belong to, and a user's stacks file can add a server the same way. The app
itself is checked (stackrace.stacks.app_spec) and imported once in its own interpreter
(stackrace.stacks.app_probe) before its stacks are made.

`--cmd 'NAME=node server.js --port {port}'` (`cmd_stack`) makes a stack of one command
template for one run: split with shlex (never a shell), its placeholders checked as a
stacks file's are.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from stackrace.settings import scenario
from stackrace.stacks.app_probe import resolve_app
from stackrace.stacks.app_spec import AppError, AppSpec, YourApp, no_braces
from stackrace.stacks.availability import availability
from stackrace.stacks.catalogue import StackFile
from stackrace.stacks.definition import ConfigError, Needs, StackDef
from stackrace.stacks.placeholders import PLACEHOLDER
from stackrace.stacks.validate import STACK_NAME, check_def
from stackrace.stacks.variants import resolve

if TYPE_CHECKING:
    from stackrace.settings.race_settings import RaceSettings

APP_TAG = "[app]"
# the servers the picker preselects for an app: the common four of each kind
COMMON = {
    "wsgi": ("gunicorn-sync", "gunicorn-gevent", "uwsgi", "granian-wsgi"),
    "asgi": ("uvicorn", "granian-asgi", "hypercorn", "gunicorn-uvicorn"),
}


def _fill(text: str, values: dict[str, str]) -> str:
    """Fill only these placeholders; the launcher fills the others at start."""
    return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def app_stack_name(server: str) -> str:
    return f"{server}{APP_TAG}"


def app_stacks(
    defs: dict[str, StackDef],
    app: AppSpec,
    app_env: dict[str, str],
    health: str = "/",
    health_status: str = "2xx,3xx",
    health_headers: dict[str, str] | None = None,
) -> dict[str, StackDef]:
    """`SERVER[app]` for every block with an app template of the app's interface;
    `app_env`: the app's own environment (app_probe.app_environment), the same in each."""
    out: dict[str, StackDef] = {}
    values = {"app_target": app.target, "app_dir": str(app.app_dir)}
    for name, spec in defs.items():
        tmpl = spec.app
        if tmpl is None or tmpl.interface != app.interface or APP_TAG in name:
            continue
        command = [_fill(a, values) for a in tmpl.command]
        env = {k: _fill(v, values) for k, v in tmpl.env.items()}
        env.update(app_env)
        used = {m.group(1) for t in [*command, *env.values()] for m in PLACEHOLDER.finditer(t)}
        params = {k: v for k, v in spec.params.items() if k in used}
        gen = StackDef(
            command=command,
            title=app_stack_name(name),  # what the user types and the panes show
            language="python",
            family=spec.family,
            description=tmpl.description
            or f"{app.label} ({app.interface.upper()}) under {spec.title}, the shipped "
            f"block's settings: {spec.description}",
            cwd=str(app.app_dir),
            env=env,
            workers=spec.workers,
            threads=spec.threads,
            params=params,
            choices={k: v for k, v in spec.choices.items() if k in params},
            kinds={k: v for k, v in spec.kinds.items() if k in params},
            health=health,
            health_status=health_status,
            health_headers=dict(health_headers or {}),
            ready_timeout=max(spec.ready_timeout, 30.0),
            stop_timeout=spec.stop_timeout,
            version=[_fill(a, values) for a in tmpl.version] if tmpl.version else None,
            needs=Needs(modules=list(tmpl.modules)),
            db=False,
            python=app.python,
            production=spec.production,
            # the block's status page, where its app template turns it on too (uWSGI)
            status=spec.status if "status_port" in used else None,
        )
        out[app_stack_name(name)] = gen
    return out


def cmd_stack(
    text: str, health: str, health_status: str = "200", health_headers: dict[str, str] | None = None
) -> tuple[str, StackDef]:
    """`--cmd 'NAME=COMMAND'` → (NAME, a stack of it), or AppError. The command is split
    as a shell would split words (shlex), never run by one; its placeholders are those
    of a stacks file, checked the same way."""
    name, eq, command = text.partition("=")
    name = name.strip()
    if not eq or not STACK_NAME.match(name) or "[" in name:
        raise AppError(
            f"--cmd {text[:60]!r}: expected NAME=COMMAND, NAME of lower-case letters, digits, . _ -"
        )
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise AppError(f"--cmd {name}: {exc}") from None
    if not argv:
        raise AppError(f"--cmd {name}: no command after '='")
    if not all(a.isprintable() for a in argv):
        raise AppError(f"--cmd {name}: control characters in the command")
    cwd = os.getcwd()
    no_braces(cwd, f"--cmd {name}: the current directory")
    spec = StackDef(
        command=argv,
        title=name,
        description=f"--cmd: {shlex.join(argv)}",
        cwd=cwd,
        health=health,
        health_status=health_status,
        health_headers=dict(health_headers or {}),
        db=False,
    )
    try:
        check_def(Path("--cmd"), name, spec)
    except ConfigError as exc:
        raise AppError(str(exc).replace("--cmd: stack", "--cmd:", 1)) from None
    return name, spec


def with_stacks(stacks: StackFile, extra: dict[str, StackDef], what: str) -> StackFile:
    """The stacks of the files plus `extra` (made for this run); a name in both is an
    error: a run must never start something other than what its name says."""
    clash = sorted(set(extra) & set(stacks))
    if clash:
        raise AppError(f"{what} {clash[0]}: a stack of that name is in {stacks.source}")
    merged = StackFile(
        {**stacks, **extra}, stacks.source, stacks.path, stacks.origin, stacks.sha256, stacks.files
    )
    merged.generated = {**stacks.generated, **{n: what for n in extra}}
    merged.untrusted = dict(stacks.untrusted)
    for name in extra:  # `SERVER[app]` made from an untrusted block runs its command too
        base = name.removesuffix(APP_TAG)
        if base != name and base in stacks.untrusted:
            merged.untrusted[name] = stacks.untrusted[base]
    return merged


def with_run_stacks(
    stacks: StackFile, opts: YourApp, settings: RaceSettings | None = None
) -> StackFile:
    """The stacks files' stacks plus those made for this run: `SERVER[app]` for --app and
    one per --cmd, ready on the first of the run's requests (scenario.health). Raises
    AppError or ScenarioError."""
    if not opts.given:
        return stacks
    kinds = settings.request_kinds() if settings is not None else None
    health, status, headers = scenario.health(kinds)
    if opts.app:
        app, app_env = resolve_app(opts, stacks)
        made = app_stacks(stacks, app, app_env, health, status, headers)
        if not made:
            raise AppError(
                f"--app {app.label}: no server in {stacks.source} runs {app.interface.upper()} apps"
            )
        stacks = with_stacks(stacks, made, "--app")
        stacks.app = app
    for text in opts.cmds:
        if kinds is None and settings is not None:
            health, status = settings.path, "200"  # the workload's path, as a block's
        name, spec = cmd_stack(text, health, status, headers)
        stacks = with_stacks(stacks, {name: spec}, "--cmd")
    return stacks


def default_app_stacks(stacks: StackFile) -> tuple[list[str], list[str]]:
    """With --app and no --stacks: the common four servers of the app's kind that can run
    here, and the names of the other servers that run it (available or not)."""
    app = stacks.app
    generated = [
        n for n, what in stacks.generated.items() if what == "--app" and n not in stacks.untrusted
    ]
    if app is None:
        return [], []
    common = [app_stack_name(n) for n in COMMON[app.interface] if app_stack_name(n) in stacks]
    chosen = [n for n in common if availability(resolve(n, stacks)).available]
    return chosen, [n for n in generated if n not in chosen]


def left_out_note(chosen: list[str], others: list[str]) -> str:
    """What `bench` and the app's `--go` say when they race the common servers and not
    the others that run the app (the picker would have shown them)."""
    return f"racing {', '.join(chosen)}; also possible: {', '.join(others)} (--stacks to choose)"


def install_hint(stacks: StackFile) -> str:
    """The command that installs the common servers of the app's kind into the app's
    own environment (what to say when none of them can run it yet)."""
    app = stacks.app
    generated = [n for n, what in stacks.generated.items() if what == "--app"]
    if app is None or not generated:
        return ""
    python = stacks[generated[0]].python
    return f"stackrace install --into {python} {' '.join(COMMON[app.interface])}"


def missing_servers(names: list[str], stacks: StackFile) -> str:
    """'' when every `SERVER[app]` named (variants too) can run in the app's interpreter;
    else one line naming those that cannot and the command that installs them there.
    Asked before anything starts, whatever --python says: a server missing there would
    otherwise die at start with only its exit code to show."""
    missing: dict[str, str] = {}
    python = ""
    for name in names:
        base = name.partition(":")[0]
        if stacks.generated.get(base) != "--app":
            continue
        stack = resolve(name, stacks)
        avail = availability(stack)
        if not avail.available:
            missing.setdefault(base.removesuffix(APP_TAG), avail.reason)
            python = stack.spec.python or sys.executable
    if not missing:
        return ""
    servers = " ".join(missing)
    why = "; ".join(dict.fromkeys(missing.values()))
    return (
        f"{', '.join(app_stack_name(m) for m in missing)}: cannot run with {python} "
        f"({why}): `stackrace install --into {python} {servers}` installs "
        f"{'them' if len(missing) > 1 else 'it'} there"
    )


def generated_names(stacks: StackFile) -> list[str]:
    """The stacks made for this run (--app, --cmd), in order (none of an untrusted block)."""
    return [n for n in stacks.generated if n not in stacks.untrusted]


__all__ = [
    "APP_TAG",
    "COMMON",
    "app_stack_name",
    "app_stacks",
    "cmd_stack",
    "default_app_stacks",
    "generated_names",
    "install_hint",
    "left_out_note",
    "missing_servers",
    "with_run_stacks",
    "with_stacks",
]
