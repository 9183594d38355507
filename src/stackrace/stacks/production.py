"""The command line that runs a stack's configuration in production, as a person types it.

    production_command(resolve("gunicorn-gthread:workers=3,threads=8", stacks))
    → Production("gunicorn --bind HOST:PORT --workers 3 --worker-class gthread
                  --threads 8 … wsgi_app:app", note="run it in the app's directory …")

Derived from the stack's own `command` in stacks.toml (one definition, no table of
special cases): its placeholders are filled the way a deployment needs them rather
than the way stackrace's launcher does —
- the server's program by its name, not stackrace's venv (`{venv_bin}/gunicorn` →
  `gunicorn`, `{python}` → `python`: the interpreter of the app's own environment);
- the address a placeholder the user replaces (`{host}:{port}` → `HOST:PORT`): a
  loopback port chosen for one race means nothing on a server;
- the configuration measured (`{workers}`, `{threads}`, every param) as the candidate had it;
- the app as the server imports it: `{app_target}` (`--app myapp:app`) as given, and the
  app's directory (the stack's `cwd`, `{app_dir}`, a shipped stack's `{apps}/python`)
  as `.`, the directory the command is run in.
A command that needs a file of stackrace's own (a launcher script under `{apps}`, a
config written to `{run_dir}`) has no production form: `command` is then None and
`note` says why, rather than printing a line that cannot work elsewhere.

Only what differs from the server's own defaults is kept: a flag whose value measured
is the server's default (the stack's `production.defaults`: gunicorn's `--workers 1`,
`--keep-alive 2`) is left out, and so is a flag only stackrace's runs need
(`production.harness`: gunicorn's `--no-control-socket`, which lets several servers run
side by side on one machine and which older gunicorns refuse). The note names the app
the line serves — yours (`--app`), or plainly stackrace's own test app, to be replaced
— and the server's version it needs (the stack's requirement, `gunicorn>=27`, and the
version measured).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from stackrace.stacks.definition import Stack

HOST, PORT = "HOST", "PORT"
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
# where the launcher's own files live: an argument still naming one after the app's
# directory became `.` is a file of stackrace's, not the server's
_OURS = ("apps", "root", "run_dir")


@dataclass(frozen=True)
class Production:
    command: str | None  # None: no production form (note says why)
    note: str
    app: str = ""  # the app the line serves: "yours (myapp:app)" or stackrace's test app
    requires: str = ""  # the server's version it needs, and the version measured


def _drop_defaults(args: list[str], defaults: dict[str, str], harness: list[str]) -> list[str]:
    """The arguments without harness flags and without flags set to their default."""
    out: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        flag, eq, value = a.partition("=")
        if a in harness or (eq and flag in harness):
            i += 1
            continue
        if eq and flag in defaults and value == defaults[flag]:
            i += 1
            continue
        if not eq and a in defaults and i + 1 < len(args) and args[i + 1] == defaults[a]:
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def _server_requirement(stack: Stack, requires: list[str]) -> str:
    """The requirement of the server itself (`gunicorn>=27`) among the stack's: the
    package its command runs."""
    text = " ".join(stack.spec.command)
    for req in requires:
        name = re.split(r"[<>=!~\[ ;]", req, maxsplit=1)[0]
        if name and re.search(rf"(^|[/ ]){re.escape(name)}( |$)", text):
            return req
    return ""


def production_command(
    stack: Stack,
    requires: list[str] | None = None,
    measured: str = "",
    app_target: str | None = None,
) -> Production:
    """The deploy line of `stack`; `requires`: the stack's package requirements (its
    `needs.pip`, or its app template's), `measured`: the server's version as measured,
    `app_target`: the user's app it serves (`--app module:attr`; None: stackrace's)."""
    spec = stack.spec
    values: dict[str, str] = {
        "host": HOST,
        "port": PORT,
        "workers": str(stack.workers),
        "threads": str(stack.threads),
        "python": "python",
        "name": stack.base,
        "app_dir": ".",
        # the status page stackrace reads in evidence windows: its flags are the block's
        # `production.harness` (uWSGI's --stats=…), left out of the line
        "status_port": "STATUS_PORT",
        **{k: str(v) for k, v in stack.params.items()},
    }
    app_dir = spec.cwd or ""
    out: list[str] = []
    for n, arg in enumerate(spec.command):
        if app_dir and arg == app_dir:
            out.append(".")
            continue
        if app_dir and arg.startswith(app_dir + "/"):
            arg = arg[len(app_dir) + 1 :]
        if n == 0 or arg.startswith("{venv_bin}/") or arg.startswith("{pypy_bin}/"):
            arg = re.sub(r"^\{(venv_bin|pypy_bin)\}/", "", arg)
        ours = [k for k in _PLACEHOLDER.findall(arg) if k in _OURS]
        # a script beside a shipped app (`python bjoern_server.py`) is stackrace's too
        if ours or (n > 0 and arg.endswith(".py") and _theirs_is_ours(app_dir)):
            return Production(
                None,
                f"{stack.name} runs a script or file of stackrace's own ({arg}): it has "
                "no server command line of its own to name",
            )
        try:
            arg = _PLACEHOLDER.sub(lambda m: values[m.group(1)], arg)
        except KeyError as exc:
            return Production(None, f"{stack.name}: its command uses {{{exc.args[0]}}}")
        out.append(arg)
    prod = spec.production
    out = [out[0], *_drop_defaults(out[1:], prod.defaults, prod.harness)]
    if app_target:
        app = f"your app ({app_target})"
    else:
        test_app = next((a for a in out if re.fullmatch(r"\w+_app:app", a)), "")
        app = (
            f"stackrace's own test app ({test_app}): put your app's module:attr in its "
            "place, or tune with --app module:attr to measure yours"
            if test_app
            else "stackrace's own test app"
        )
    req = _server_requirement(stack, list(requires or spec.needs.pip))
    requires_text = ""
    if req or measured:
        requires_text = f"needs {req}" if req else "needs the server measured"
        if measured:
            requires_text += f" (measured with {measured})"
    note = (
        f"replace {HOST}:{PORT} with the address to serve on; run it in the app's "
        "directory, in the environment that has the app and the server"
    )
    return Production(" ".join(shlex.quote(a) for a in out), note, app, requires_text)


def _theirs_is_ours(cwd: str) -> bool:
    """The stack runs in a directory of stackrace's (a shipped stack's apps/python)."""
    return any(k in _OURS for k in _PLACEHOLDER.findall(cwd))
