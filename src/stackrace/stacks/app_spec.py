"""Your app as the command line gives it, checked: `--app`, `--app-dir`, `--python`,
`--env` and `--env-file` (typed as `YourApp` by the command) into an `AppSpec`.

    stackrace --app myproject.wsgi:application          # or: --app main:app, --app path/app.py:app

The app runs in its own environment, not stackrace's: the servers are started with the
Python that can import the app (`--python PATH`, else the active virtualenv, else the
interpreter stackrace runs on), in `--app-dir` (default: the app's directory, or the
current one for a dotted module), which is on the import path.

Everything here is user text on its way to a command line, a working directory or an
environment, so it is checked first: module:attr is `^[\\w.]+:[\\w.]+$` (or a path to a
.py file or a package, whose name becomes the module), --python an existing executable
file, --app-dir an existing directory, environment keys valid names. None of them is
ever run through a shell, and none may hold a brace, which a stack's command line would
read as a placeholder. Whether the app imports, and as WSGI or ASGI, is
stackrace.stacks.app_probe's; the stacks made for it, stackrace.stacks.userapp's.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from stackrace.base import inputfile
from stackrace.base.errors import StackraceError

_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_ATTR = _DOTTED
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class AppError(StackraceError, ValueError):
    """A user's app, interpreter, directory or environment that cannot be used."""

    exit_code = 2  # input that cannot be used: refused before anything starts


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


def no_braces(text: str, what: str) -> None:
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
    no_braces(str(full), what)
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
        no_braces(path, "--python")
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
    no_braces(value, where)


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
