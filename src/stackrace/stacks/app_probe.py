"""Importing your app once, in its own interpreter and directory, before anything starts:
whether it is WSGI or ASGI, and which servers that interpreter can import.

A missing package is then one clear line ("No module named 'flask'") and a missing
server is named with the command that installs it there (`stackrace install --into
PYTHON NAME`), never into stackrace's venv. The probe is a short script run with the
app's Python (`_PROBE`), never through a shell; the line it prints last carries its
findings (an app may print on import).

An import runs the app's code, and that code may start a daemon (a double fork that
keeps the inherited stdout open). So the probe is cleaned up as a stack is
(stackrace.supervise.sweep): a session of its own, a tracking cgroup where one can be
made, the environment token, and stackrace as subreaper; whatever it left running is
killed the moment it exits (or times out). Its output goes to files, not pipes, and
the wait is for the probe process itself: a daemon holding stdout open cannot make the
probe "take longer than 60s" (reading a pipe to EOF waited on the daemon).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from stackrace.base.printable import terminal
from stackrace.stacks.app_spec import (
    AppError,
    AppSpec,
    YourApp,
    choose_python,
    parse_env,
    parse_target,
)
from stackrace.stacks.availability import remember_importable
from stackrace.stacks.definition import INTERFACES, StackDef
from stackrace.supervise import sweep
from stackrace.supervise.procs import child_setup

# the line the probe prints last (an app may print on import)
_MARK = "STACKRACE-APP-PROBE "
INSPECT_TIMEOUT_S = 60.0
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
    argv = [app.python, "-c", _PROBE, app.target, *modules]
    returncode, stdout, stderr = _run_probe(argv, app, timeout)
    line = next((x for x in reversed(stdout.splitlines()) if x.startswith(_MARK)), None)
    if line is None:
        tail = [terminal(x) for x in (stderr or stdout).strip().splitlines()[-3:]]
        raise AppError(
            f"--app {app.label}: {app.python} exited with {returncode} while importing it"
            + (": " + " | ".join(tail) if tail else "")
        )
    found = _probe_answer(line[len(_MARK) :])
    if found is None:
        raise AppError(
            f"--app {app.label}: {app.python} printed a probe line stackrace cannot read "
            "(the app writes to stdout while it is imported?)"
        )
    if "error" in found:
        error = terminal(str(found["error"]))
        hint = ""
        if "ModuleNotFoundError" in error:
            hint = (
                " (install the app's requirements for that interpreter, activate the app's "
                "virtualenv, or give --python PATH)"
            )
        raise AppError(
            f"--app {app.label}: cannot import it with {app.python} in {app.app_dir}: {error}{hint}"
        )
    modules_found = found.get("modules", {})
    return Inspection(
        str(found.get("interface", "")),
        {str(k): bool(v) for k, v in modules_found.items()}
        if isinstance(modules_found, dict)
        else {},
        terminal(str(found.get("python", ""))),
    )


def _probe_answer(text: str) -> dict[str, object] | None:
    """The probe's JSON line as a dict; None when it is not one: the line is the app's
    interpreter's stdout, which the app's import can write too (nested 100,000 deep)."""
    try:
        found = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return found if isinstance(found, dict) else None


def _run_probe(argv: list[str], app: AppSpec, timeout: float) -> tuple[int, str, str]:
    """Run the probe to its exit (at most `timeout`), then end whatever it started; its
    exit status, stdout and stderr (their last MiB each). AppError when it cannot be
    run or does not exit in time."""
    token = sweep.new_token()
    cgroup = sweep.tracking_cgroup("app-probe")
    env = {**os.environ, **app_environment(app), sweep.TOKEN_VAR: token}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                argv,
                cwd=app.app_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                preexec_fn=child_setup(None, cgroup, must_enter=False),
            )
        except OSError as exc:
            if cgroup is not None:
                sweep.remove_cgroup(cgroup)
            raise AppError(f"--python {app.python}: cannot run it: {exc.strerror or exc}") from None
        try:
            proc.wait(timeout=timeout)  # the probe's own exit, never its stdout's EOF
        except subprocess.TimeoutExpired:
            raise AppError(
                f"--app {app.label}: importing it with {app.python} took longer than {timeout:g}s"
            ) from None
        finally:
            _end_all(proc, cgroup, token)
        return proc.returncode, _tail(out), _tail(err)


def _end_all(proc: subprocess.Popen[bytes], cgroup: Path | None, token: str) -> None:
    """SIGKILL the probe and everything it started (its session, its descendants, its
    cgroup, its token: supervise.sweep), reap what stackrace adopted, drop the cgroup."""
    cgroups = [cgroup] if cgroup is not None else []
    for _ in range(3):  # a daemon forking while it is killed is found on the next pass
        found = sweep.stack_pids([proc.pid], [proc.pid], cgroups, [token])
        if cgroup is not None:
            sweep.kill_cgroup(cgroup)
        sweep.signal_pids(found, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=2)
        sweep.reap(found)
        if not sweep.alive(found):
            break
        time.sleep(0.05)
    if cgroup is not None:
        sweep.remove_cgroup(cgroup)


_TAIL_BYTES = 1 << 20


def _tail(f: IO[bytes]) -> str:
    """The last MiB of an output file (a daemon may have written on and on)."""
    size = f.seek(0, os.SEEK_END)
    f.seek(max(0, size - _TAIL_BYTES))
    return f.read(_TAIL_BYTES).decode("utf-8", "replace")


def resolve_app(opts: YourApp, defs: dict[str, StackDef]) -> tuple[AppSpec, dict[str, str]]:
    """The app of the command line, inspected: its interface (told or detected), and the
    environment every server runs it in (`app_environment`); which server modules its
    interpreter can import is remembered for availability."""
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
    remember_importable(app.python, found.modules)
    interface = opts.interface or found.interface
    if interface not in INTERFACES:
        raise AppError(
            f"--app {app.label}: cannot tell whether it is WSGI or ASGI: give --wsgi or --asgi"
        )
    app = AppSpec(
        target=app.target,
        app_dir=app.app_dir,
        python=app.python,
        interface=interface,
        env=app.env,
        given=app.given,
    )
    return app, app_environment(app)
