"""The placeholders of a stack block: which there are, their values, and filling them.

Placeholders: {host} (always 127.0.0.1), {port}, {workers}, {threads}, {apps}, {root},
{run_dir}, {venv_bin}, {python}, {pypy_bin}, {name}, {upstream_port} (stacks with an
upstream), {status_port} (stacks with a `status` page: a loopback port of its own),
{tls_cert} and {tls_key} (stacks with `tls = true`), and any key of
[stacks.NAME.params] (string values users may override in a variant, e.g.
`worker_class`; a param may not reuse a built-in name). Every {word} in a
templated key — and in the files a [[stacks.NAME.files]] template names — must be one of
these: a typo like {prot} is an error when the file is read (stackrace.stacks.validate),
not when the stack starts. {apps} is the apps/ directory the stacks run and build in,
{root} the directory holding it: a checkout's own, or a package's working copy
(stackrace.base.paths says where). An app template (`[stacks.NAME.app]`) may use
{app_target} and {app_dir} too (stackrace.stacks.userapp).

`templated` names every value of a block that the launcher or the installer fills, so
the check when a file is read and the fill when a stack starts walk the same keys.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from stackrace.base import paths
from stackrace.base.ports import free_port
from stackrace.stacks.definition import ConfigError, Stack, StackDef

HOST = "127.0.0.1"
PLACEHOLDER = re.compile(r"\{(\w+)\}")  # a {word}: other braces (nginx's) are text
# The placeholders `placeholders()` fills, besides a stack's own params.
PLACEHOLDERS = (
    "host",
    "port",
    "workers",
    "threads",
    "apps",
    "root",
    "run_dir",
    "venv_bin",
    "python",
    "pypy_bin",
    "name",
)
PICK = None  # placeholders(…, status_port=PICK): a free loopback port for the status page
# The placeholders an app template (`[stacks.NAME.app]`) may use besides a block's own.
APP_PLACEHOLDERS = ("app_target", "app_dir")


def templated(spec: StackDef) -> Iterator[tuple[str, str]]:
    """(key, text) of every value the launcher or installer fills placeholders in."""
    for i, arg in enumerate(spec.command):
        yield f"command[{i}]", arg
    yield "cwd", spec.cwd
    if spec.status is not None:
        yield "status", spec.status
    for k, v in spec.env.items():
        yield f"env.{k}", v
    for i, arg in enumerate(spec.version or []):
        yield f"version[{i}]", arg
    needs = spec.needs
    for i, arg in enumerate(needs.bins):
        yield f"needs.bins[{i}]", arg
    for i, cmd in enumerate(needs.build):
        for j, arg in enumerate(cmd):
            yield f"needs.build[{i}][{j}]", arg
    yield "needs.build_cwd", needs.build_cwd
    for i, arg in enumerate(needs.built):
        yield f"needs.built[{i}]", arg
    yield "needs.npm_cwd", needs.npm_cwd
    for i, proc in enumerate(spec.processes):
        for j, arg in enumerate(proc.command):
            yield f"processes[{i}].command[{j}]", arg
        for k, v in proc.env.items():
            yield f"processes[{i}].env.{k}", v
        if proc.ready_path is not None:
            yield f"processes[{i}].ready_path", proc.ready_path
    for i, tmpl in enumerate(spec.files):
        yield f"files[{i}].path", tmpl.path
        yield f"files[{i}].template", tmpl.template


def unknown_placeholder(text: str, known: set[str]) -> str | None:
    return next((m.group(1) for m in PLACEHOLDER.finditer(text) if m.group(1) not in known), None)


def venv_bin(which: str = "main") -> Path:
    """The bin directory of the venv a stack's pip packages go to: the one stackrace runs
    in, or the PyPy venv (stackrace.base.paths says where it lives)."""
    if which == "pypy":
        return paths.pypy_venv() / "bin"
    return Path(sys.executable).parent


def placeholders(
    stack: Stack,
    port: int,
    run_dir: Path,
    host: str = HOST,
    upstream_port: int = 0,
    tls: tuple[Path, Path] | None = None,
    status_port: int | None = 0,
) -> dict[str, Any]:
    """The values of a stack's placeholders; `tls`: the (certificate, key) files of a
    stack with `tls = true` (the launcher makes them, stacks.certificate); `status_port`:
    the port of its status page, for a stack with `status` (`PICK`: a free one, chosen
    here when the stack is started)."""
    own = stack.spec.python  # an app's interpreter: its directory, not resolved (a venv's
    # bin/python is a link to the system's, and the venv is what has the packages)
    values: dict[str, Any] = {
        "host": host,  # 127.0.0.1, except on a cluster's app node (see stackrace.cluster)
        "port": port,
        "workers": stack.workers,
        "threads": stack.threads,
        "apps": paths.apps_dir(),
        "root": paths.work_root(),
        "run_dir": run_dir,
        "venv_bin": Path(own).parent if own else venv_bin(stack.spec.needs.venv),
        "python": own or venv_bin(stack.spec.needs.venv) / "python",
        "pypy_bin": venv_bin("pypy"),
        "name": stack.base,
    }
    if stack.upstream is not None:
        # only where there is one: elsewhere {upstream_port} is an unknown placeholder
        values["upstream_port"] = upstream_port
    if stack.spec.tls:
        # only where declared: elsewhere {tls_cert} is an unknown placeholder
        cert, key = tls if tls is not None else ("", "")
        values["tls_cert"], values["tls_key"] = cert, key
    if stack.spec.status is not None:
        # only where declared: elsewhere {status_port} is an unknown placeholder
        # always on loopback, never {host}: a cluster's app node serves the load beyond it
        values["status_port"] = free_port(HOST) if status_port is PICK else status_port
    values.update(stack.params)
    return values


def render(text: str, values: dict[str, Any]) -> str:
    """Fill {word} placeholders. Other braces (nginx's `location / { … }`) stay as they are."""

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in values:
            raise ConfigError(f"unknown placeholder {{{key}}} in {text[:80]!r}")
        return str(values[key])

    return PLACEHOLDER.sub(sub, text)


class FilledNeeds(NamedTuple):
    """A stack's `needs` with their placeholders filled, once: what availability checks
    and what the installer runs and builds in."""

    bins: list[str]  # needs.bins, then the program of every command the launcher runs
    build: list[list[str]]
    build_cwd: Path
    built: list[Path]
    npm_cwd: Path


def filled_needs(stack: Stack) -> FilledNeeds:
    """The stack's `needs`, filled; port and run directory are not known before a start,
    and nothing in `needs` may depend on them."""
    values = placeholders(stack, 0, Path("/nonexistent-run-dir"))
    needs = stack.spec.needs
    argv0 = [stack.spec.command[0], *(p.command[0] for p in stack.spec.processes)]
    return FilledNeeds(
        bins=list(dict.fromkeys(render(raw, values) for raw in [*needs.bins, *argv0])),
        build=[[render(a, values) for a in cmd] for cmd in needs.build],
        build_cwd=Path(render(needs.build_cwd, values)),
        built=[Path(render(b, values)) for b in needs.built],
        npm_cwd=Path(render(needs.npm_cwd, values)),
    )
