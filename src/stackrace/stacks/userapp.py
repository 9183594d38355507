"""Your app on every server: the stacks `SERVER[app]` made for a user's WSGI or ASGI app.

    stackrace --app myproject.wsgi:application          # or: --app main:app, --app path/app.py:app
    stackrace bench --app examples/flask_app:app --path /:3 --path /slow:1

A shipped server block that can serve any app carries an app template
(`[stacks.NAME.app]` in stacks.toml: its interface and command line, with {app_target}
for module:attr). `app_stacks` makes, for every template of the app's interface, a
stack named `NAME[app]` from the block and its template: the block's conventions (one
worker, keep-alive, no access log, loopback), its tunables (so `gunicorn-sync[app]:
workers=4` works), the template's command. The templates are declared once, beside the
blocks they belong to, and a user's stacks file can add a server the same way.

The app runs in its own environment, not stackrace's: the servers are started with the
Python that can import the app (`--python PATH`, else the active virtualenv, else the
interpreter stackrace runs on), in `--app-dir` (default: the app's directory, or the
current one for a dotted module), which is on the import path. `inspect_app` imports
the app once with that Python before anything starts: it says whether the app is WSGI
or ASGI, and which servers that Python can import, so a missing package is one clear
line ("No module named 'flask'") and a missing server is named with the command that
installs it there (`stackrace install --into PYTHON NAME`), never into stackrace's venv.

Everything here is user text on its way to a command line, a working directory or an
environment, so it is checked first: module:attr is `^[\\w.]+:[\\w.]+$` (or a path to a
.py file or a package, whose name becomes the module), --python an existing executable
file, --app-dir an existing directory, environment keys valid names. None of them is
ever run through a shell, and none may hold a brace, which a stack's command line would
read as a placeholder.

`--cmd 'NAME=node server.js --port {port}'` (`cmd_stack`) makes a stack of one command
template for one run: split with shlex (never a shell), its placeholders checked as a
stacks file's are.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from stackrace.base import inputfile
from stackrace.base.errors import StackraceError
from stackrace.stacks import install
from stackrace.stacks.catalogue import (
    _NAME,
    INTERFACES,
    PLACEHOLDERS,
    ConfigError,
    Needs,
    StackDef,
    StackFile,
    _check,
)

if TYPE_CHECKING:
    from stackrace.settings.race_settings import RaceSettings

APP_TAG = "[app]"
_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_ATTR = _DOTTED
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# the servers the picker preselects for an app: the common four of each kind
COMMON = {
    "wsgi": ("gunicorn-sync", "gunicorn-gevent", "uwsgi", "granian-wsgi"),
    "asgi": ("uvicorn", "granian-asgi", "hypercorn", "gunicorn-uvicorn"),
}
# the line the probe prints last (an app may print on import)
_MARK = "STACKRACE-APP-PROBE "
INSPECT_TIMEOUT_S = 60.0


class AppError(StackraceError, ValueError):
    """A user's app, interpreter, directory or environment that cannot be used."""


@dataclass(frozen=True)
class AppSpec:
    """The user's app as the servers will import it."""

    target: str  # module:attr, as the servers are given it
    app_dir: Path  # the working directory, on the import path
    python: str  # the interpreter (absolute; a venv's link is not resolved)
    interface: str = ""  # wsgi or asgi (inspect_app, or --wsgi/--asgi)
    env: dict[str, str] = field(default_factory=dict)
    given: str = ""  # --app as typed, for messages and headers

    @property
    def label(self) -> str:
        return self.given or self.target


def _no_braces(text: str, what: str) -> None:
    if "{" in text or "}" in text:
        raise AppError(
            f"{what}: braces are not allowed ({text[:60]!r}): a stack reads them as placeholders"
        )


def parse_target(text: str, app_dir: str | None = None) -> tuple[str, Path]:
    """`--app` → (module:attr, the app's directory). `text` is `module.sub:attr`, or a
    path to a file (`src/main.py:app`, `.py` optional) or a package directory
    (`examples/flask_app:app`), whose parent is the app's directory."""
    if not text.isprintable() or len(text) > 500:
        raise AppError(f"--app: {text[:60]!r} is not a module:attr")
    where, colon, attr = text.rpartition(":")
    if not colon or not where or not _ATTR.match(attr):
        raise AppError(
            f"--app {text!r}: expected module:attr (e.g. main:app, myproject.wsgi:application "
            "or path/to/app.py:app)"
        )
    if _DOTTED.match(where) and not Path(where).exists() and not Path(where + ".py").is_file():
        base = Path(app_dir) if app_dir else Path.cwd()
        return f"{where}:{attr}", _directory(base, "--app-dir")
    if app_dir:
        raise AppError(
            f"--app {text!r} names a path: its directory is the app's; leave out --app-dir"
        )
    p = Path(where)
    if p.suffix == ".py" and p.is_file():
        module, parent = p.stem, p.parent
    elif p.is_dir() or Path(where + ".py").is_file():
        module, parent = p.name, p.parent
    else:
        raise AppError(f"--app {text!r}: no module, file or package {where!r} here")
    if not re.fullmatch(r"[A-Za-z_]\w*", module):
        raise AppError(f"--app {text!r}: {module!r} cannot be imported as a module name")
    return f"{module}:{attr}", _directory(parent, "--app")


def _directory(path: Path, what: str) -> Path:
    full = Path(os.path.abspath(path))
    if not full.is_dir():
        raise AppError(f"{what}: {path} is not a directory")
    _no_braces(str(full), what)
    return full


def choose_python(given: str | None) -> str:
    """The interpreter the app's servers run with: `--python`, else the active
    virtualenv's, else the one stackrace runs on. An absolute path, links kept."""
    if given:
        if not given.isprintable() or len(given) > 4096:
            raise AppError("--python: not a path")
        path = os.path.abspath(os.path.expanduser(given))
        if not os.path.isfile(path) or not os.access(path, os.X_OK):
            raise AppError(f"--python {given}: not an executable file")
        _no_braces(path, "--python")
        return path
    venv = os.environ.get("VIRTUAL_ENV")
    if venv:
        candidate = os.path.join(venv, "bin", "python")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK) and "{" not in candidate:
            return candidate
    return sys.executable


def parse_env(items: list[str] | None, env_file: str | None = None) -> dict[str, str]:
    """`--env KEY=VALUE` (repeatable) over an `--env-file` (KEY=VALUE lines; `#`
    comments, `export `, quotes): the app's environment. Checked: valid names, no NUL,
    no braces."""
    out: dict[str, str] = {}
    if env_file:
        try:
            text = inputfile.read_text(env_file, limit=inputfile.MiB)
        except inputfile.InputFileError as exc:
            raise AppError(f"--env-file {exc}") from None
        for n, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            line = line.removeprefix("export ").strip()
            key, eq, value = line.partition("=")
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            _env_item(key.strip(), eq, value, f"{env_file}:{n}")
            out[key.strip()] = value
    for item in items or []:
        key, eq, value = item.partition("=")
        _env_item(key, eq, value, f"--env {item[:40]!r}")
        out[key] = value
    return out


def _env_item(key: str, eq: str, value: str, where: str) -> None:
    if not eq or not _ENV_KEY.match(key):
        raise AppError(f"{where}: expected KEY=VALUE with a name of letters, digits and _")
    if "\0" in value:
        raise AppError(f"{where}: a NUL byte in the value")
    _no_braces(value, where)


@dataclass(frozen=True)
class YourApp:
    """What the command line asks of your app and your commands, typed (the flags are
    commands/target_args.py's): `--app`, its directory, interpreter, environment and
    interface, and each `--cmd`."""

    app: str | None = None  # MODULE:ATTR as given
    app_dir: str | None = None
    python: str | None = None
    env: tuple[str, ...] = ()  # KEY=VALUE, as given
    env_file: str | None = None
    interface: str | None = None  # "wsgi", "asgi", or None: detected
    cmds: tuple[str, ...] = ()  # NAME=COMMAND templates

    @property
    def given(self) -> bool:
        return bool(self.app or self.cmds)


# --- inspecting the app in its own interpreter ---------------------------------------

_PROBE = r"""
import importlib, importlib.util, inspect, json, sys
target, modules = sys.argv[1], sys.argv[2:]
def found(name):
    try:
        return importlib.util.find_spec(name) is not None
    except Exception:
        return False
out = {"modules": {m: found(m) for m in modules},
       "python": sys.version.split()[0]}
module, _, attr = target.partition(":")
try:
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
except BaseException as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
else:
    call = getattr(obj, "__call__", None)
    if not callable(obj):
        out["error"] = f"{attr} is a {type(obj).__name__}, not a WSGI or ASGI app"
    elif inspect.iscoroutinefunction(obj) or inspect.iscoroutinefunction(call):
        out["interface"] = "asgi"
    else:
        try:
            n = len([p for p in inspect.signature(obj).parameters.values()
                     if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)])
        except (TypeError, ValueError):
            n = 0
        out["interface"] = {2: "wsgi", 3: "asgi"}.get(n, "")
print()
print("STACKRACE-APP-PROBE " + json.dumps(out))
"""


@dataclass(frozen=True)
class Inspection:
    interface: str  # "" when it could not be told
    modules: dict[str, bool]  # each server module asked about: importable there
    python_version: str = ""


def app_environment(app: AppSpec) -> dict[str, str]:
    """The app's own variables, and its directory first on the import path."""
    env = dict(app.env)
    inherited = env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    env["PYTHONPATH"] = str(app.app_dir) + (os.pathsep + inherited if inherited else "")
    return env


def inspect_app(app: AppSpec, modules: list[str], timeout: float = INSPECT_TIMEOUT_S) -> Inspection:
    """Import the app once with its own interpreter, in its directory: WSGI or ASGI, and
    which of `modules` (the servers) that interpreter can import. AppError with the
    import's own error when the app cannot be imported."""
    from stackrace.supervise.procs import child_setup

    argv = [app.python, "-c", _PROBE, app.target, *modules]
    try:
        proc = subprocess.run(
            argv,
            cwd=app.app_dir,
            env={**os.environ, **app_environment(app)},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            preexec_fn=child_setup(None, None),
        )
    except subprocess.TimeoutExpired:
        raise AppError(
            f"--app {app.label}: importing it with {app.python} took longer than {timeout:g}s"
        ) from None
    except OSError as exc:
        raise AppError(f"--python {app.python}: cannot run it: {exc.strerror or exc}") from None
    line = next((x for x in reversed(proc.stdout.splitlines()) if x.startswith(_MARK)), None)
    if line is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise AppError(
            f"--app {app.label}: {app.python} exited with {proc.returncode} while importing it"
            + (": " + " | ".join(tail) if tail else "")
        )
    found = json.loads(line[len(_MARK) :])
    if "error" in found:
        hint = ""
        if "ModuleNotFoundError" in found["error"]:
            hint = (
                " (install the app's requirements for that interpreter, activate the app's "
                "virtualenv, or give --python PATH)"
            )
        raise AppError(
            f"--app {app.label}: cannot import it with {app.python} in {app.app_dir}: "
            f"{found['error']}{hint}"
        )
    return Inspection(found.get("interface", ""), found.get("modules", {}), found.get("python", ""))


def resolve_app(opts: YourApp, defs: dict[str, StackDef]) -> tuple[AppSpec, dict[str, bool]]:
    """The app of the command line, inspected: its interface (told or detected), and
    which server modules its interpreter can import (remembered for availability)."""
    assert opts.app is not None
    target, app_dir = parse_target(opts.app, opts.app_dir)
    app = AppSpec(
        target=target,
        app_dir=app_dir,
        python=choose_python(opts.python),
        env=parse_env(list(opts.env) or None, opts.env_file),
        given=opts.app,
    )
    modules = sorted({m for d in defs.values() if d.app for m in d.app.modules})
    found = inspect_app(app, modules)
    install.remember_importable(app.python, found.modules)
    interface = opts.interface or found.interface
    if interface not in INTERFACES:
        raise AppError(
            f"--app {app.label}: cannot tell whether it is WSGI or ASGI: give --wsgi or --asgi"
        )
    return AppSpec(
        target=app.target,
        app_dir=app.app_dir,
        python=app.python,
        interface=interface,
        env=app.env,
        given=app.given,
    ), found.modules


# --- the generated stacks -------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _fill(text: str, values: dict[str, str]) -> str:
    """Fill only these placeholders; the launcher fills the others at start."""
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def app_stack_name(server: str) -> str:
    return f"{server}{APP_TAG}"


def app_stacks(
    defs: dict[str, StackDef],
    app: AppSpec,
    health: str = "/",
    health_status: str = "2xx,3xx",
    health_headers: dict[str, str] | None = None,
) -> dict[str, StackDef]:
    """`SERVER[app]` for every block with an app template of the app's interface."""
    out: dict[str, StackDef] = {}
    values = {"app_target": app.target, "app_dir": str(app.app_dir)}
    for name, spec in defs.items():
        tmpl = spec.app
        if tmpl is None or tmpl.interface != app.interface or APP_TAG in name:
            continue
        command = [_fill(a, values) for a in tmpl.command]
        env = {k: _fill(v, values) for k, v in tmpl.env.items()}
        env.update(app_environment(app))
        used = {m.group(1) for t in [*command, *env.values()] for m in _PLACEHOLDER.finditer(t)}
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
    if not eq or not _NAME.match(name) or "[" in name:
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
    _no_braces(cwd, f"--cmd {name}: the current directory")
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
        _check(Path("--cmd"), name, spec)
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
    return merged


def with_run_stacks(
    stacks: StackFile, opts: YourApp, settings: RaceSettings | None = None
) -> StackFile:
    """The stacks files' stacks plus those made for this run: `SERVER[app]` for --app and
    one per --cmd, ready on the first of the run's requests (scenario.health). Raises
    AppError or ScenarioError."""
    from stackrace.settings import scenario

    if not opts.given:
        return stacks
    kinds = settings.request_kinds() if settings is not None else None
    health, status, headers = scenario.health(kinds)
    if opts.app:
        app, _ = resolve_app(opts, stacks)
        made = app_stacks(stacks, app, health, status, headers)
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
    from stackrace.stacks.catalogue import resolve
    from stackrace.stacks.install import availability

    app = stacks.app
    generated = [n for n, what in stacks.generated.items() if what == "--app"]
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
    from stackrace.stacks.catalogue import resolve
    from stackrace.stacks.install import availability

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
    """The stacks made for this run (--app, --cmd), in order."""
    return list(stacks.generated)


__all__ = [
    "APP_TAG",
    "COMMON",
    "PLACEHOLDERS",
    "AppError",
    "AppSpec",
    "YourApp",
    "app_stacks",
    "cmd_stack",
    "inspect_app",
    "install_hint",
    "left_out_note",
    "missing_servers",
    "parse_env",
    "parse_target",
    "resolve_app",
    "with_stacks",
]
