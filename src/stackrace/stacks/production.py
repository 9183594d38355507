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
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from stackrace.stacks.catalogue import Stack

HOST, PORT = "HOST", "PORT"
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
# where the launcher's own files live: an argument still naming one after the app's
# directory became `.` is a file of stackrace's, not the server's
_OURS = ("apps", "root", "run_dir")


@dataclass(frozen=True)
class Production:
    command: str | None  # None: no production form (note says why)
    note: str


def production_command(stack: Stack) -> Production:
    spec = stack.spec
    values: dict[str, str] = {
        "host": HOST,
        "port": PORT,
        "workers": str(stack.workers),
        "threads": str(stack.threads),
        "python": "python",
        "name": stack.base,
        "app_dir": ".",
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
    note = (
        f"replace {HOST}:{PORT} with the address to serve on; run it in the app's "
        "directory, in the environment that has the app and the server"
    )
    return Production(" ".join(shlex.quote(a) for a in out), note)


def _theirs_is_ours(cwd: str) -> bool:
    """The stack runs in a directory of stackrace's (a shipped stack's apps/python)."""
    return any(k in _OURS for k in _PLACEHOLDER.findall(cwd))
