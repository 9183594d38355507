"""Checking a stacks file's blocks when the file is read: every error names the file,
the stack and the key, in one line:

    stacks.toml: stack 'gunicorn-sync': key 'workers': expected `int`, got `str`

Checked here: types and unknown keys (msgspec), names, family, workers/threads ≥ 1,
ready_timeout/stop_timeout > 0 and at most an hour (`MAX_TIMEOUT_S`), cpus non-empty
without negatives or repeats, health headers, the status page (`_status_problem`:
loopback, http or tcp, never a workload's path on the load's port), placeholders (in
the block and in the template files it renders), optional workloads, and each param's
choices, kind and executables. What depends on the machine rather than the file (the
CPUs in `cpus`, the ceilings of workers and threads) is checked when a stack is chosen
(stackrace.stacks.variants).
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

import msgspec

from stackrace.base import paths
from stackrace.engine.request import RequestError, check_header
from stackrace.settings import statuses

# MAX_TIMEOUT_S: ready_timeout and stop_timeout too
from stackrace.settings.parsers import MAX_TIMEOUT_S
from stackrace.settings.workloads import WORKLOADS
from stackrace.stacks import protocols
from stackrace.stacks.definition import (
    DB_WORKLOADS,
    FAMILIES,
    INTERFACES,
    OPTIONAL_WORKLOADS,
    ConfigError,
    StackDef,
)
from stackrace.stacks.placeholders import (
    APP_PLACEHOLDERS,
    PLACEHOLDERS,
    render,
    templated,
    unknown_placeholder,
)
from stackrace.stacks.tunables import param_kind

# a block's name; a generated stack adds a tag in brackets (`gunicorn-sync[app]`, stackrace.
# userapp): stackrace.base.slug makes directory names and widget ids of either
STACK_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*(\[[a-z0-9._-]+\])?$")
_MEMORY = re.compile(r"^\d+[KMG]?$")
# a stack's name as a file that travels names it (a run file, a recording, a journal):
# a stack (STACK_NAME), a variant of one (`gunicorn-sync:workers=4`, a path param's
# `/usr/bin/x`), your app (`name[app]`) or a URL target's label (`url1`, `api@host`).
# Letters, digits and `. _ - : = , / @ + [ ]` only: nothing that a terminal, markup, a
# table or a page reads as anything but a name (an ESC, a BEL, `<script>`, `|`)
NAME_IN_FILE = re.compile(r"^[A-Za-z0-9\[][A-Za-z0-9._:=,/@+\[\]-]{0,199}$")


def label_in_file_problem(label: str) -> str:
    """What is wrong with a stack's label ('' when nothing): its title in a stacks file
    or a recording (`gunicorn (sync worker)`, `meets p99 < 50 ms`), a URL target's
    label. Words, so only printable (no ESC, BEL, newline or bidi override) and at most
    200 characters; a `<` or a `|` is escaped by each sink (stackrace.base.printable)."""
    if label.isprintable() and len(label) <= 200:
        return ""
    return (
        f"stack {label[:80]!r} is not a name stackrace records (printable, at most 200 "
        "characters): edited or damaged"
    )


def name_in_file_problem(name: str) -> str:
    """What is wrong with a stack's name read from a file ('' when nothing): the one
    rule for run files, recordings and journals (NAME_IN_FILE)."""
    if NAME_IN_FILE.match(name):
        return ""
    # repr: the name's control characters shown as escapes, never sent raw
    return (
        f"stack name {name[:80]!r} is not one stackrace writes (letters, digits and "
        ". _ - : = , / @ + [ ], at most 200): edited or damaged"
    )


def display_path(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _explain(path: Path, stack: str, exc: msgspec.ValidationError) -> ConfigError:
    # msgspec says e.g. "Expected `int`, got `str` - at `$.needs.pip[0]`"
    text = str(exc)
    message, _, at = text.partition(" - at ")
    message = message[0].lower() + message[1:] if message else message
    key = at.strip("`").removeprefix("$").lstrip(".")
    name = re.search(r"`([\w-]+)`", message)
    if name and ("unknown field" in message or "missing required field" in message):
        key = f"{key}.{name.group(1)}" if key else name.group(1)
    return ConfigError(f"{display_path(path)}: stack '{stack}': key '{key or '?'}': {message}")


def check_def(path: Path, name: str, spec: StackDef) -> None:
    def bad(key: str, why: str) -> ConfigError:
        return ConfigError(f"{display_path(path)}: stack '{name}': key '{key}': {why}")

    if not STACK_NAME.match(name):
        raise bad("name", "use lower-case letters, digits, '.', '_' and '-'")
    if label_in_file_problem(spec.title):  # shown in every pane, table and recording
        raise bad("title", "printable text (no control characters), at most 200 characters")
    if not spec.command:
        raise bad("command", "must not be empty")
    if spec.family not in FAMILIES:
        raise bad("family", f"{spec.family!r} is not one of {', '.join(FAMILIES)}")
    if spec.workers < 1 or spec.threads < 1:
        raise bad("workers" if spec.workers < 1 else "threads", "must be at least 1")
    if not spec.health.startswith("/"):
        raise bad("health", "must be a path starting with '/'")
    try:
        statuses.parse(spec.health_status)
    except statuses.StatusError as exc:
        raise bad("health_status", str(exc)) from None
    for key, value in spec.health_headers.items():
        try:
            check_header(key, value)
        except RequestError as exc:
            raise bad("health_headers", str(exc)) from None
        if key.lower() in ("content-length", "transfer-encoding"):
            raise bad("health_headers", f"{key}: the probe sends no body")
    if spec.python is not None:  # whether it exists is the availability check's
        p_ = spec.python
        if not p_.isprintable() or not p_.startswith("/") or "{" in p_ or "}" in p_:
            raise bad("python", f"must be an absolute path, got {p_[:60]!r}")
    if spec.app is not None:
        _check_app(spec, bad)
    if spec.memory_max is not None and not _MEMORY.match(spec.memory_max):
        raise bad("memory_max", "use a size like 128M or 1G")
    if spec.needs.venv not in ("main", "pypy"):
        raise bad("needs.venv", "must be 'main' or 'pypy'")
    for i, proc in enumerate(spec.processes):
        if not proc.command:
            raise bad(f"processes[{i}].command", "must not be empty")
    for key in ("ready_timeout", "stop_timeout"):
        value = getattr(spec, key)
        if not math.isfinite(value) or value <= 0:
            raise bad(key, f"must be a number of seconds above zero, got {value:g}")
        if value > MAX_TIMEOUT_S:
            raise bad(key, f"must be at most {MAX_TIMEOUT_S:g} seconds (an hour), got {value:g}")
    if spec.cpus is not None:
        if not spec.cpus:
            raise bad("cpus", "list at least one CPU, or leave the key out")
        if any(c < 0 for c in spec.cpus):
            raise bad("cpus", f"CPU numbers start at 0, got {min(spec.cpus)}")
        if len(set(spec.cpus)) != len(spec.cpus):
            raise bad("cpus", "a CPU is listed twice")
    for param in spec.params:
        builtin = param in PLACEHOLDERS or param in (
            "upstream_port",
            "tls_cert",
            "tls_key",
            "status_port",
            "http",  # the variant key of the protocol (stacks.protocols)
        )
        if builtin or not re.fullmatch(r"\w+", param):
            why = "is a built-in placeholder" if builtin else "use letters, digits, _"
            raise bad(f"params.{param}", f"cannot be a param name: {why}")
    known = set(PLACEHOLDERS) | set(spec.params)
    if spec.upstream is not None:
        known.add("upstream_port")  # the port of the stack behind this one
    if spec.tls:
        known |= {"tls_cert", "tls_key"}  # the machine's certificate (stacks.certificate)
    if spec.status is not None:
        known.add("status_port")  # the status page's own loopback port
        problem = _status_problem(spec.status)
        if problem:
            raise bad("status", problem)
    for key, text in templated(spec):
        unknown = unknown_placeholder(text, known)
        if unknown:
            raise bad(key, f"unknown placeholder {{{unknown}}} ({_known_list(spec)})")
    for i, tmpl in enumerate(spec.files):
        unknown, where = _unknown_in_template(tmpl.template, spec, known)
        if unknown:
            raise bad(
                f"files[{i}].template",
                f"{where}: unknown placeholder {{{unknown}}} ({_known_list(spec)})",
            )
    _check_http(spec, known - {"tls_cert", "tls_key"}, bad)
    for w in spec.workloads:
        if w not in OPTIONAL_WORKLOADS:
            optional = ", ".join(OPTIONAL_WORKLOADS)
            raise bad("workloads", f"{w!r} is not an optional workload ({optional})")
        if w in DB_WORKLOADS and not spec.db:
            raise bad("workloads", f"{w!r} reads the database, but the stack says db = false")
    for key, allowed in spec.choices.items():
        if key not in spec.params:
            raise bad(f"choices.{key}", "not a key of params")
        if spec.params[key] not in allowed:
            raise bad(f"choices.{key}", f"the default {spec.params[key]!r} is not among {allowed}")
    for key, kind in spec.kinds.items():
        if key not in spec.params:
            raise bad(f"kinds.{key}", "not a key of params")
        if kind not in ("count", "word", "path"):
            raise bad(f"kinds.{key}", f"{kind!r} is not one of count, word, path")
        if key in spec.choices:
            raise bad(f"kinds.{key}", "a param with choices is of kind choice already")
    for key, listed in spec.executables.items():
        if key not in spec.params or param_kind(spec, key) != "path":
            raise bad(f"executables.{key}", 'not a param of kind "path" (see `kinds`)')
        for value in listed:
            if not value.isprintable() or not value.startswith("/"):
                raise bad(f"executables.{key}", f"{value[:60]!r} is not an absolute path")
            if os.path.normpath(value) != value:
                raise bad(f"executables.{key}", f"{value!r} is not a normalised path")
    for key, default in spec.params.items():
        if key in spec.choices:
            continue
        if param_kind(spec, key) == "count" and not default.isdigit():
            raise bad(f"params.{key}", f"a count must be a whole number, got {default!r}")
    if spec.facts is not None and not spec.facts.startswith("/"):
        raise bad("facts", "must be a path starting with '/'")


def _check_http(spec: StackDef, known: set[str], bad: Any) -> None:
    """The HTTP/2 modes (`[stacks.NAME.http."2"]`, `.h2c`): known names, and the
    placeholders of each as the mode runs ("2" knows {tls_cert} and {tls_key})."""
    for value, mode in spec.http.items():
        if value not in protocols.MODES:
            raise bad(f"http.{value}", f"not an HTTP mode ({', '.join(protocols.MODES)})")
        if mode.command is not None and not mode.command:
            raise bad(f"http.{value}.command", "must not be empty")
        mine = known | ({"tls_cert", "tls_key"} if value == "2" else set())
        texts = [(f"command[{i}]", a) for i, a in enumerate(mode.command or [])]
        texts += [(f"env.{k}", v) for k, v in mode.env.items()]
        texts += [(f"files[{i}].path", f.path) for i, f in enumerate(mode.files)]
        texts += [(f"files[{i}].template", f.template) for i, f in enumerate(mode.files)]
        for key, text in texts:
            unknown = unknown_placeholder(text, mine)
            if unknown:
                raise bad(f"http.{value}.{key}", f"unknown placeholder {{{unknown}}}")
        run = protocols.apply(spec, value)  # every file the mode renders, as it runs
        for tmpl in run.files:
            unknown, where = _unknown_in_template(tmpl.template, run, mine)
            if unknown:
                raise bad(f"http.{value}.files", f"{where}: unknown placeholder {{{unknown}}}")


def _check_app(spec: StackDef, bad: Any) -> None:
    app = spec.app
    assert app is not None
    if app.interface not in INTERFACES:
        raise bad("app.interface", f"{app.interface!r} is not one of {', '.join(INTERFACES)}")
    if not app.command:
        raise bad("app.command", "must not be empty")
    known = {*PLACEHOLDERS, *spec.params, *APP_PLACEHOLDERS}
    if spec.status is not None:
        known.add("status_port")  # your app's server shows the block's status page too
    texts = [(f"app.command[{i}]", a) for i, a in enumerate(app.command)]
    texts += [(f"app.env.{k}", v) for k, v in app.env.items()]
    texts += [(f"app.version[{i}]", a) for i, a in enumerate(app.version or [])]
    for key, text in texts:
        unknown = unknown_placeholder(text, known)
        if unknown:
            raise bad(
                key, f"unknown placeholder {{{unknown}}} ({_known_list(spec)}, app_target, app_dir)"
            )
    for module in app.modules:
        if not re.fullmatch(r"[A-Za-z_][\w.]*", module):
            raise bad("app.modules", f"{module!r} is not a module name")


# a status page's URL: http or tcp (uWSGI's stats socket), on loopback, on the stack's
# own port or the status page's own; a path (and a query) of printable characters only
_STATUS_URL = re.compile(
    r"^(http|tcp)://(\{host\}|127\.0\.0\.1|localhost):(\{port\}|\{status_port\})"
    r"(/[!-~]*)?$"
)


def _status_problem(url: str) -> str:
    """What is wrong with a block's `status` URL ('' when nothing). On the load's own
    port its path must not be a workload's: the load would count the page's answers as
    its own (and a status page is the server's, not the app's)."""
    m = _STATUS_URL.match(url)
    if m is None:
        return (
            "a loopback URL: http://{host}:{status_port}/PATH (or {port}), or "
            f"tcp://{{host}}:{{status_port}} for a stats socket; got {url[:80]!r}"
        )
    path = (m.group(4) or "/").split("?")[0]
    if m.group(3) == "{port}" and path.strip("/") in WORKLOADS:
        return f"the path {path} is a workload's: the load would reach the status page"
    return ""


def _known_list(spec: StackDef) -> str:
    return "known: " + ", ".join([*PLACEHOLDERS, *spec.params])


def _unknown_in_template(template: str, spec: StackDef, known: set[str]) -> tuple[str | None, str]:
    """The first unknown placeholder inside a template file, and the file's name. A
    template that cannot be found or read is left to the launcher, which says so."""
    # the shipped apps/ (the templates a package's working copy is made from): checking a
    # file never needs that copy to exist
    shipped = paths.shipped_dir()
    values: dict[str, Any] = {"apps": shipped / "apps", "root": shipped, "name": "?"}
    values.update({k: "" for k in known if k not in values})
    try:
        path = Path(render(template, values))
        text = path.read_text()
    except (ConfigError, OSError, UnicodeDecodeError):
        return None, template
    return unknown_placeholder(text, known), display_path(path)


def stack_defs(raw: dict[str, Any], p: Path) -> dict[str, StackDef]:
    """The [stacks.NAME] blocks of a parsed file (or of a run's record), each converted and
    checked; errors name `p`."""
    blocks = raw.get("stacks")
    if not isinstance(blocks, dict) or not blocks:
        raise ConfigError(f"{display_path(p)}: no [stacks.NAME] blocks")
    extra = sorted(set(raw) - {"stacks"})
    if extra:
        raise ConfigError(
            f"{display_path(p)}: unknown top-level key '{extra[0]}' (only [stacks.*])"
        )
    stacks: dict[str, StackDef] = {}
    for name, block in blocks.items():
        # one stack at a time, so an error can name the stack (msgspec elides dict keys)
        try:
            spec = msgspec.convert(block, StackDef)
        except msgspec.ValidationError as exc:
            raise _explain(p, name, exc) from None
        if not spec.title:
            spec.title = name
        check_def(p, name, spec)
        stacks[name] = spec
    return stacks
