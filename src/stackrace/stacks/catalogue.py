"""stacks.toml → typed, validated stack definitions.

Every error names the file, the stack and the key, in one line:

    stacks.toml: stack 'gunicorn-sync': key 'workers': expected `int`, got `str`

A stack block (see stacks.toml for the full set and docs/stacks.md, "Adding your own stack"):

    [stacks.NAME]
    title = "gunicorn (sync worker)"
    language = "python"
    family = "sync"                  # sync | threaded | async | greenlet | prefork | event-loop
    description = "…; /io blocks the worker"
    command = ["{venv_bin}/gunicorn", "-b", "{host}:{port}", "-w", "{workers}", "app:app"]
    cwd = "{apps}/python"            # default: {apps}
    env = { KEY = "value" }
    workers = 1                      # default values of the tunables, overridable by variants
    threads = 1
    health = "/hello"                # ready = first HTTP 200 on this path
    health_headers = { Host = "x" }  # optional: headers the readiness probe sends there
    ready_timeout = 20.0
    stop_timeout = 5.0
    cpus = [0]                       # optional: pin every process of the stack to these CPUs
    memory_max = "256M"              # optional: cgroup v2 memory.max, where writable
    version = ["{venv_bin}/gunicorn", "--version"]   # optional: prints the server's version
    [stacks.NAME.needs]
    pip = ["gunicorn"]               # into the project's venv (or `venv = "pypy"`)
    apt = ["nginx"]
    bins = ["nginx"]                 # must be on PATH (or absolute / with placeholders)
    build = [["go", "build", "-o", "bin/server", "."]]   # run in `build_cwd` by `install`
    build_cwd = "{apps}/go/nethttp"
    built = ["{apps}/go/nethttp/bin/server"]             # files the build must have made
    [[stacks.NAME.processes]]        # helpers started before `command` (php-fpm before nginx)
    name = "php-fpm"
    command = [...]
    leaves_group = true              # it calls setsid itself: signal its own pid to stop it
    ready_path = "{run_dir}/php-fpm.sock"   # wait for this file before going on
    [[stacks.NAME.files]]            # rendered into {run_dir} before start
    path = "nginx.conf"
    template = "{apps}/php/nginx.conf.tmpl"
    [stacks.NAME.params]             # tunables other than workers/threads, string values
    opcache = "on"
    [stacks.NAME.choices]            # optional: the only values a variant may give a param
    opcache = ["on", "off"]
    [stacks.NAME.kinds]              # optional: a param's kind, where not inferred
    php_fpm = "path"
    [stacks.NAME.executables]        # optional: the executables of a path param that a
    php_fpm = ["/usr/sbin/php-fpm8.3"]   # preset, run file or recording may name too

Optional keys for what a stack serves and what verify proves about it:

    db = true                        # serves /db (gets the database settings); false: not
    workloads = ["dbjson"]           # optional workloads it serves too (settings/workloads.py)
    facts = "/_facts"                # a JSON object the app computes about itself
    expect = { opcache = "{opcache}" }   # what `stackrace verify` must find: a key of the
                                     # facts object, or one verify measures (db_persistent)

A stack that serves HTTPS:

    tls = true                       # the stack listens with TLS on {port}; it gets
                                     # {tls_cert} and {tls_key}, a self-signed certificate
                                     # for localhost/127.0.0.1 made once per machine in
                                     # the data directory (stackrace.stacks.certificate);
                                     # its URL is https://127.0.0.1:PORT, its readiness
                                     # probe and `verify` speak TLS, and the engine trusts
                                     # exactly that certificate. An upstream behind it
                                     # (nginx terminating TLS) stays plain HTTP.

A stack in front of another (nginx as a reverse proxy):

    upstream = "{backend}"           # a stack (or variant) started first, on a port of its
                                     # own, {upstream_port}; usually a param, so that
                                     # `nginx-proxy:backend=gevent-pywsgi` picks it. The
                                     # front stack serves what its upstream serves.

Placeholders: {host} (always 127.0.0.1), {port}, {workers}, {threads}, {apps}, {root},
{run_dir}, {venv_bin}, {python}, {pypy_bin}, {name}, {upstream_port} (stacks with an
upstream), {tls_cert} and {tls_key} (stacks with `tls = true`), and any key of
[stacks.NAME.params] (string values users may override in a variant, e.g.
`worker_class`; a param may not reuse a built-in name). Every {word} in a
templated key — and in the files a [[stacks.NAME.files]] template names — must be one of
these: a typo like {prot} is an error when the file is read, not when the stack starts.
{apps} is the apps/ directory the stacks run and build in, {root} the directory holding
it: a checkout's own, or a package's working copy (stackrace.base.paths says where).

Which files: `--stacks-file FILE` alone; else the one shipped with stackrace, with
~/.config/stackrace/stacks.toml ($XDG_CONFIG_HOME) and ./stacks.toml on top when they
exist, each adding stacks and replacing those of the same name (`replace = true` at a
file's top: that file alone). `stacks_files` says which, `load_stacks` merges them.
A ./stacks.toml that replaces a stack of the files below it (a shipped "uvicorn" with
a command of its own: what a cloned repository could do) is refused until the user
trusts it (`stackrace stacks --trust ./stacks.toml`, stackrace.stacks.trust: remembered by its
content) or names it with --stacks-file; one that only adds stacks is used. Every
command that runs stacks prints the files it read first (`announcement`).
`title` (default: the block's name), `language`, `family` ("other") and `description`
only describe a stack: a user's block may leave them out.

Checked when the file is read: types and unknown keys, names, family, workers/threads
≥ 1, ready_timeout/stop_timeout > 0, cpus non-empty without negatives or repeats,
placeholders. Checked when a stack is chosen (`resolve`), because it depends on the
machine rather than the file: every CPU in `cpus` is one this process may use.

Variants: "NAME:workers=4,threads=8" anywhere a stack name is accepted. A variant's value
may itself be a stack with one override: `nginx-proxy:backend=gunicorn-sync:workers=4`.

A variant is user text that may come from a preset, a run file or a colleague's command
line, and its values end up in command lines and rendered config files: each value is
checked against its param's kind (`param_kind`) before anything starts —
- workers, threads and params whose default is a whole number: a count, whole and ≥ 1,
  at most `COUNT_CEILING` (and workers and threads at most `tunable_ceilings()`);
- params with `choices`: one of them;
- params declared `kinds = { P = "path" }`: an absolute, normalised path to an existing
  executable file (a server binary such as php-fpm), and only the command line (or the
  picker: the person at the keyboard) names one freely. A variant read from a file —
  a preset, a run file (`bench --from`), a recording, another stack's `upstream` — is
  refused in one line when it names an executable other than the param's default or
  one the stack lists in `executables`: a data file that travels must never choose
  what runs (`resolve(..., named_in=COMMAND_LINE)` is the command line's);
- every other param: a word of letters, digits and `. _ - : = +` (no `/`, spaces,
  braces, quotes, `;` or control characters: nothing that could reach outside a
  directory, split an argument or end a line of a config file).

Ceilings for workers and threads come from the machine (cores and available memory) so
that a typo like `workers=99999999` is an error, not 873 processes booting;
`stackrace --no-tunable-limits …` lifts them (`lift_limits`) for one run. Timeouts in a
stacks file are at most an hour (`MAX_TIMEOUT_S`).
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from stackrace.base import inputfile, paths
from stackrace.base.errors import StackraceError
from stackrace.engine.request import RequestError, check_header
from stackrace.settings import statuses

# MAX_TIMEOUT_S: ready_timeout and stop_timeout too; COMMAND_LINE: see `resolve`
from stackrace.settings.options import COMMAND_LINE, MAX_TIMEOUT_S
from stackrace.settings.workloads import WORKLOADS
from stackrace.stacks import trust

if TYPE_CHECKING:
    from stackrace.stacks.userapp import AppSpec

FAMILIES = ("sync", "threaded", "async", "greenlet", "prefork", "event-loop", "other")
HOST = "127.0.0.1"
# workloads a stack serves only when its `workloads` lists them (dbjson), and those that
# read the database (a stack serving one gets the database settings): stackrace.settings.workloads
OPTIONAL_WORKLOADS = tuple(name for name, w in WORKLOADS.items() if w.optional)
DB_WORKLOADS = tuple(name for name, w in WORKLOADS.items() if w.needs_db)
# a block's name; a generated stack adds a tag in brackets (`gunicorn-sync[app]`, stackrace.
# userapp): stackrace.base.slug makes directory names and widget ids of either
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*(\[[a-z0-9._-]+\])?$")
_MEMORY = re.compile(r"^\d+[KMG]?$")
# a param value of kind "word" (see the module docstring)
_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:=+-]{0,99}$")
PARAM_KINDS = ("count", "word", "path", "choice")
COUNT_CEILING = 100_000  # a count param (worker_connections, db_pool, spare processes)


class ConfigError(StackraceError, ValueError):
    """A stacks file or a stack reference that cannot be used; the message says where."""


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


class Needs(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    pip: list[str] = []
    pip_no_deps: list[str] = []  # installed with --no-deps (meinheld pins an old greenlet)
    venv: str = "main"  # "main" (the venv stackrace runs in) or "pypy" (paths.pypy_venv)
    apt: list[str] = []
    bins: list[str] = []
    build: list[list[str]] = []
    build_cwd: str = "{apps}"
    built: list[str] = []
    npm: list[str] = []
    npm_cwd: str = "{apps}"
    # Python modules that must import in the stack's own interpreter (`python`): an app's
    # servers are looked for there, not in stackrace's venv
    modules: list[str] = []


class Process(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    command: list[str]
    leaves_group: bool = False
    ready_path: str | None = None
    env: dict[str, str] = {}


class FileTemplate(msgspec.Struct, forbid_unknown_fields=True):
    path: str
    template: str


class AppTemplate(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """How this server serves a user's app (`stackrace --app module:attr`): the stack
    `NAME[app]` is made from the block and this template (stackrace.stacks.userapp). Besides the
    block's placeholders its command may use {app_target} (module:attr) and {app_dir};
    {python} and {venv_bin} are the app's interpreter and its bin directory."""

    interface: str  # "wsgi" or "asgi"
    command: list[str]
    env: dict[str, str] = {}
    pip: list[str] = []  # what `stackrace install --into PYTHON NAME` installs there
    pip_no_deps: list[str] = []
    modules: list[str] = []  # must import in the app's interpreter (default: none)
    description: str = ""
    version: list[str] | None = None


class ProductionSpec(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """How the stack's command reads as a deploy line (stacks/production.py): the
    server's own defaults of its flags (`--workers = "1"`: a flag whose value is the
    default is left out of the line) and the flags only stackrace's runs need (several
    servers side by side on one machine: gunicorn's `--no-control-socket`)."""

    defaults: dict[str, str] = {}
    harness: list[str] = []


class StackDef(msgspec.Struct, forbid_unknown_fields=True):
    command: list[str]
    # descriptive: a block of a user's file may leave them out (title: the block's name)
    title: str = ""
    language: str = ""
    family: str = "other"
    description: str = ""
    cwd: str = "{apps}"
    env: dict[str, str] = {}
    workers: int = 1
    threads: int = 1
    params: dict[str, str] = {}
    health: str = "/hello"
    ready_timeout: float = 20.0
    stop_timeout: float = 5.0
    cpus: list[int] | None = None
    memory_max: str | None = None
    version: list[str] | None = None
    needs: Needs = msgspec.field(default_factory=Needs)
    processes: list[Process] = []
    files: list[FileTemplate] = []
    db: bool = True  # serves /db (gets the database settings in its environment)
    workloads: list[str] = []  # optional workloads served besides the contract (dbjson)
    choices: dict[str, list[str]] = {}  # allowed values of params, checked in variants
    kinds: dict[str, str] = {}  # a param's kind when not inferred (PARAM_KINDS): "path"
    # a path param's executables that a preset, a run file or a recording may name too
    # (the command line may name any executable: see `resolve`)
    executables: dict[str, list[str]] = {}
    upstream: str | None = None  # a stack started first that this one forwards to
    tls: bool = False  # serves HTTPS with {tls_cert}/{tls_key} (stacks.certificate)
    facts: str | None = None  # path of a JSON object of facts the app reports on itself
    expect: dict[str, str] = {}  # facts `stackrace verify` must find (placeholders allowed)
    # the statuses that make the stack ready on `health` ("200", "2xx", "200-299,404"):
    # any other answer but a 5xx ends the start at once (definite), a 5xx is waited out
    health_status: str = "200"
    # headers the readiness probe sends on `health` (an app that serves one Host only):
    # for your app, the headers of your first request (-H, a scenario's)
    health_headers: dict[str, str] = {}
    # the interpreter the stack runs with when it is not stackrace's (an app's own):
    # {python} is it and {venv_bin} its directory
    python: str | None = None
    app: AppTemplate | None = None  # how this server serves a user's app (--app)
    production: ProductionSpec = msgspec.field(default_factory=ProductionSpec)


@dataclass(frozen=True)
class Stack:
    """One stack as the launcher uses it: a definition plus the variant's overrides."""

    name: str  # display name, e.g. "gunicorn-sync:workers=4"
    base: str  # the block name in the file
    spec: StackDef
    overrides: dict[str, str] = field(default_factory=dict)
    upstream: Stack | None = None  # the stack this one forwards to (resolved `upstream`)

    @property
    def workers(self) -> int:
        return int(self.overrides.get("workers", self.spec.workers))

    @property
    def threads(self) -> int:
        return int(self.overrides.get("threads", self.spec.threads))

    @property
    def params(self) -> dict[str, str]:
        merged = dict(self.spec.params)
        merged.update({k: v for k, v in self.overrides.items() if k in self.spec.params})
        return merged

    @property
    def title(self) -> str:
        title = self.spec.title
        if self.upstream is not None:
            title = f"{title} → {self.upstream.spec.title}"
        if not self.overrides:
            return title
        extra = ", ".join(f"{k}={v}" for k, v in self.overrides.items())
        return f"{title} ({extra})"

    def serves(self, workload: str) -> bool:
        """Whether the stack answers this workload's endpoint. Every stack serves the
        contract (hello, json, io, and db unless `db = false`); optional workloads only
        where listed in `workloads`. A stack in front of another serves what that one does."""
        if self.upstream is not None:
            return self.upstream.serves(workload)
        if workload == "db":
            return self.spec.db
        if workload in OPTIONAL_WORKLOADS:
            return workload in self.spec.workloads
        return True

    def served(self, workloads: list[str]) -> list[str]:
        return [w for w in workloads if self.serves(w)]


def _where(path: Path) -> str:
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
    return ConfigError(f"{_where(path)}: stack '{stack}': key '{key or '?'}': {message}")


def _check(path: Path, name: str, spec: StackDef) -> None:
    def bad(key: str, why: str) -> ConfigError:
        return ConfigError(f"{_where(path)}: stack '{name}': key '{key}': {why}")

    if not _NAME.match(name):
        raise bad("name", "use lower-case letters, digits, '.', '_' and '-'")
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
        builtin = param in PLACEHOLDERS or param in ("upstream_port", "tls_cert", "tls_key")
        if builtin or not re.fullmatch(r"\w+", param):
            why = "is a built-in placeholder" if builtin else "use letters, digits, _"
            raise bad(f"params.{param}", f"cannot be a param name: {why}")
    known = set(PLACEHOLDERS) | set(spec.params)
    if spec.upstream is not None:
        known.add("upstream_port")  # the port of the stack behind this one
    if spec.tls:
        known |= {"tls_cert", "tls_key"}  # the machine's certificate (stacks.certificate)
    for key, text in _templated(spec):
        unknown = _unknown_placeholder(text, known)
        if unknown:
            raise bad(key, f"unknown placeholder {{{unknown}}} ({_known_list(spec)})")
    for i, tmpl in enumerate(spec.files):
        unknown, where = _unknown_in_template(tmpl.template, spec, known)
        if unknown:
            raise bad(
                f"files[{i}].template",
                f"{where}: unknown placeholder {{{unknown}}} ({_known_list(spec)})",
            )
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


# The placeholders an app template (`[stacks.NAME.app]`) may use besides a block's own.
APP_PLACEHOLDERS = ("app_target", "app_dir")
INTERFACES = ("wsgi", "asgi")


def _check_app(spec: StackDef, bad: Any) -> None:
    app = spec.app
    assert app is not None
    if app.interface not in INTERFACES:
        raise bad("app.interface", f"{app.interface!r} is not one of {', '.join(INTERFACES)}")
    if not app.command:
        raise bad("app.command", "must not be empty")
    known = {*PLACEHOLDERS, *spec.params, *APP_PLACEHOLDERS}
    texts = [(f"app.command[{i}]", a) for i, a in enumerate(app.command)]
    texts += [(f"app.env.{k}", v) for k, v in app.env.items()]
    texts += [(f"app.version[{i}]", a) for i, a in enumerate(app.version or [])]
    for key, text in texts:
        unknown = _unknown_placeholder(text, known)
        if unknown:
            raise bad(
                key, f"unknown placeholder {{{unknown}}} ({_known_list(spec)}, app_target, app_dir)"
            )
    for module in app.modules:
        if not re.fullmatch(r"[A-Za-z_][\w.]*", module):
            raise bad("app.modules", f"{module!r} is not a module name")


def param_kind(spec: StackDef, key: str) -> str:
    """The kind of a tunable (PARAM_KINDS): declared in `kinds`, else `choice` for a
    param with choices, `count` for workers, threads and a param whose default is a
    whole number, `word` otherwise."""
    if key in ("workers", "threads"):
        return "count"
    if key in spec.choices:
        return "choice"
    if key in spec.kinds:
        return spec.kinds[key]
    return "count" if spec.params.get(key, "").isdigit() else "word"


@dataclass(frozen=True)
class Ceilings:
    """The most workers and threads a stack may be given on this machine."""

    workers: int
    threads: int


_limits_lifted = False


def lift_limits() -> None:
    """`--no-tunable-limits`: no ceiling on workers and threads for this process."""
    global _limits_lifted
    _limits_lifted = True


def _available_memory() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 1 << 30  # unknown: assume a small machine (1 GiB)


def tunable_ceilings() -> Ceilings:
    """The ceilings of workers and threads on this machine.

    workers: 32 per usable core (at least 64: a prefork server with 50 spare processes
    is a classic set-up, seed-004), and no more than one per 16 MiB of available memory
    (a Python worker's own memory is 15-30 MB). threads: 128 per core (at least 256),
    and one per 2 MiB of available memory. Far above anything a tuner needs on the
    machine, far below what takes it down (`workers=99999999999999999999` booted 873
    gunicorn workers in 60 s before it was refused).
    """
    cores = max(1, len(os.sched_getaffinity(0)))
    memory = _available_memory()
    workers = min(max(64, 32 * cores), max(1, memory // (16 << 20)))
    threads = min(max(256, 128 * cores), max(1, memory // (2 << 20)))
    return Ceilings(workers=workers, threads=threads)


def check_value(spec: StackDef, key: str, value: str) -> str | None:
    """What is wrong with `value` for the tunable `key` of `spec` (None: nothing)."""
    return check_kind(param_kind(spec, key), key, value, tuple(spec.choices.get(key, ())))


def check_kind(kind: str, key: str, value: str, choices: tuple[str, ...] = ()) -> str | None:
    """What is wrong with `value` for a tunable `key` of this kind (PARAM_KINDS); the one
    rule for a variant on a command line, in a preset or a run file, and in the picker."""
    if kind == "choice":
        return None if value in choices else f"{value!r} is not one of {', '.join(choices)}"
    if kind == "count":
        if not (value.isascii() and value.isdigit()) or int(value) < 1:
            return f"must be a whole number >= 1, got {value!r}"
        number = int(value)
        ceiling = COUNT_CEILING
        if key in ("workers", "threads") and not _limits_lifted:
            ceilings = tunable_ceilings()
            ceiling = ceilings.workers if key == "workers" else ceilings.threads
            if number > ceiling:
                return (
                    f"{number} is above this machine's ceiling of {ceiling} (from its cores "
                    "and memory; `stackrace --no-tunable-limits …` lifts it)"
                )
        if number > ceiling:
            return f"must be at most {ceiling}, got {number}"
        return None
    if kind == "path":
        return _check_path(value)
    if not _WORD.match(value):
        return (
            f"{value[:60]!r} is not a plain value: use letters, digits and . _ - : = + "
            "(no '/', spaces, quotes or control characters)"
        )
    return None


def _check_path(value: str) -> str | None:
    if not value.isprintable() or len(value) > 4096:
        return "a path must be printable text"
    if not value.startswith("/") or os.path.normpath(value) != value:
        return f"must be an absolute, normalised path (no '..', '.' or '//'), got {value!r}"
    if not os.path.isfile(value) or not os.access(value, os.X_OK):
        return f"{value} is not an executable file"
    return None


@dataclass(frozen=True)
class Tunable:
    """One setting a variant may change: `workers`, `threads` or a param, with its
    default and, where the stacks file lists them, the only values allowed."""

    key: str
    default: str
    choices: tuple[str, ...] = ()
    numeric: bool = False  # workers and threads: a whole number >= 1
    kind: str = "word"  # PARAM_KINDS: how a value is checked (check_kind)

    def problem(self, value: str) -> str | None:
        """What is wrong with `value` for this setting (None: nothing)."""
        return check_kind(self.kind, self.key, value, self.choices)


def tunables(spec: StackDef) -> list[Tunable]:
    """What the picker offers to change for a stack: workers and threads where the
    stack uses them (in a command, env or a file it renders), then every param."""
    used = {m.group(1) for _key, text in _templated(spec) for m in _PLACEHOLDER.finditer(text)}
    shipped = paths.shipped_dir()
    values: dict[str, Any] = {"apps": shipped / "apps", "root": shipped}
    for tmpl in spec.files:
        try:
            text = Path(render(tmpl.template, {**values, **_blank(tmpl.template)})).read_text()
        except (ConfigError, OSError, UnicodeDecodeError):
            continue
        used.update(m.group(1) for m in _PLACEHOLDER.finditer(text))
    out = [
        Tunable(k, str(getattr(spec, k)), numeric=True, kind="count")
        for k in ("workers", "threads")
        if k in used
    ]
    out += [
        Tunable(k, v, tuple(spec.choices.get(k, ())), kind=param_kind(spec, k))
        for k, v in spec.params.items()
    ]
    return out


def _blank(text: str) -> dict[str, str]:
    return {
        m.group(1): "" for m in _PLACEHOLDER.finditer(text) if m.group(1) not in ("apps", "root")
    }


def _known_list(spec: StackDef) -> str:
    return "known: " + ", ".join([*PLACEHOLDERS, *spec.params])


def _templated(spec: StackDef) -> Iterator[tuple[str, str]]:
    """(key, text) of every value the launcher or installer fills placeholders in."""
    for i, arg in enumerate(spec.command):
        yield f"command[{i}]", arg
    yield "cwd", spec.cwd
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


def _unknown_placeholder(text: str, known: set[str]) -> str | None:
    return next((m.group(1) for m in _PLACEHOLDER.finditer(text) if m.group(1) not in known), None)


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
    return _unknown_placeholder(text, known), _where(path)


class StackFile(dict[str, StackDef]):
    """The stacks of the files read, by name; `source` names them as error messages do,
    `path` is the topmost file read (None: definitions recorded in a run file), `origin`
    why that file (STACKS_ORIGINS), `sha256` its content's hash (what a saved run
    records), and `files` every file read, lowest first, as (path, origin, sha256)."""

    def __init__(
        self,
        stacks: dict[str, StackDef],
        source: str,
        path: Path | None = None,
        origin: str = "",
        sha256: str = "",
        files: list[tuple[Path, str, str]] | None = None,
    ) -> None:
        super().__init__(stacks)
        self.source = source
        self.path = path
        self.origin = origin
        self.sha256 = sha256
        self.files = files if files is not None else ([(path, origin, sha256)] if path else [])
        # stacks made from --app or --cmd (stackrace.stacks.userapp): name → that option
        self.generated: dict[str, str] = {}
        self.app: AppSpec | None = None  # the --app they were made for


# Why a stacks file was read, in the search order `stacks_files` follows.
GIVEN = "given with --stacks-file"
HERE = "found in this directory"
USER = "found in your config directory"
SHIPPED = "shipped with stackrace"
STACKS_ORIGINS = (GIVEN, HERE, USER, SHIPPED)


def stacks_files(given: str | Path | None = None) -> list[tuple[Path, str]]:
    """The stacks files to read, lowest first, and why each (STACKS_ORIGINS).

    `--stacks-file FILE` is used whole: it is asked for by name. Otherwise the shipped
    file comes first, then $XDG_CONFIG_HOME/stackrace/stacks.toml and ./stacks.toml when
    they exist: each adds stacks and replaces a stack of the same name, so a user's file
    of one block leaves every shipped stack available. A file whose top says
    `replace = true` is used alone (with any file above it). In a checkout ./stacks.toml
    is the shipped file itself, and is read once, as that."""
    if given:
        return [(Path(given), GIVEN)]
    shipped = paths.shipped_stacks_file()
    out = [(shipped, SHIPPED)]
    user = paths.user_stacks_file()
    if user.is_file():
        out.append((user, USER))
    here = Path.cwd() / paths.STACKS_FILE
    if here.is_file():
        try:
            same = shipped.is_file() and here.samefile(shipped)
        except OSError:
            same = False
        if not same:
            out.append((here, HERE))
    return out


def find_stacks_file(given: str | Path | None = None) -> tuple[Path, str]:
    """The topmost stacks file read (`stacks_files`), and why."""
    return stacks_files(given)[-1]


def _read_layer(p: Path) -> tuple[dict[str, Any], str]:
    try:
        data = inputfile.read_bytes(p, limit=4 * inputfile.MiB)
        raw = tomllib.loads(data.decode())
    except inputfile.InputFileError as exc:
        raise ConfigError(str(exc).replace(str(p), _where(p), 1)) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{_where(p)}: not UTF-8 text ({exc.reason})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{_where(p)}: not valid TOML: {exc}") from None
    return raw, hashlib.sha256(data).hexdigest()


def load_stacks(path: str | Path | None = None, *, check_trust: bool = True) -> StackFile:
    """Read and validate the stacks files (`stacks_files`: the shipped one and the
    user's, merged by name; or the one given); raise ConfigError naming file, stack and
    key. A ./stacks.toml that replaces a stack of the files below it is refused until it
    is trusted (stackrace.stacks.trust; `check_trust=False`: read it all the same, to list)."""
    merged: dict[str, StackDef] = {}
    below: dict[str, StackDef] = {}  # every stack of the files read before this one
    files: list[tuple[Path, str, str]] = []
    for p, origin in stacks_files(path):
        defs, replace, sha = read_stacks_file(p)
        if replace:  # this file alone (and those above it)
            merged, files = {}, []
        if origin == HERE and check_trust:
            replaced = replaced_stacks(defs, below)
            if replaced and not trust.is_trusted(p, sha):
                raise ConfigError(untrusted_line(p, replaced))
        below.update(defs)
        merged.update(defs)
        files.append((p.resolve(), origin, sha))
    top, origin, sha = files[-1]
    source = " + ".join(_where(f) for f, _, _ in files)
    return StackFile(merged, source, top, origin, sha, files)


def read_stacks_file(p: Path) -> tuple[dict[str, StackDef], bool, str]:
    """One stacks file's stacks, whether it says `replace = true`, and its content's
    SHA-256; ConfigError naming the file."""
    raw, sha = _read_layer(p)
    replace = raw.pop("replace", False)
    if not isinstance(replace, bool):
        raise ConfigError(f"{_where(p)}: key 'replace': expected true or false")
    return stack_defs(raw, p), replace, sha


def replaced_stacks(defs: dict[str, StackDef], below: dict[str, StackDef]) -> list[str]:
    """The stacks of `below` that `defs` defines otherwise (same name, another block)."""
    return [name for name, spec in defs.items() if name in below and below[name] != spec]


def untrusted_line(path: Path, replaced: list[str]) -> str:
    """Why a ./stacks.toml is not used, and the two ways to use it."""
    where = _where(path)
    if not where.startswith(("/", ".")):
        where = f"./{where}"  # as typed in this directory
    names = ", ".join(f"'{n}'" for n in replaced[:4]) + (" …" if len(replaced) > 4 else "")
    return (
        f"{where}: replaces the shipped {'stack' if len(replaced) == 1 else 'stacks'} "
        f"{names} with its own command; not used until you trust it (`stackrace stacks "
        f"--trust {where}`, remembered until the file changes) or name it "
        f"(`stackrace --stacks-file {where} …`)"
    )


def announcement(stacks: StackFile) -> list[str]:
    """The lines a command that runs stacks prints first: every stacks file it read,
    lowest first, and why (a file outside the package must never act unseen)."""
    out = [f"stacks file: {path} ({origin})" for path, origin, _ in stacks.files]
    if len(stacks.files) > 1:
        out.append("  (each file adds its stacks and replaces those of the same name)")
    return out


def stack_defs(raw: dict[str, Any], p: Path) -> dict[str, StackDef]:
    """The [stacks.NAME] blocks of a parsed file (or of a run's record), each converted and
    checked; errors name `p`."""
    blocks = raw.get("stacks")
    if not isinstance(blocks, dict) or not blocks:
        raise ConfigError(f"{_where(p)}: no [stacks.NAME] blocks")
    extra = sorted(set(raw) - {"stacks"})
    if extra:
        raise ConfigError(f"{_where(p)}: unknown top-level key '{extra[0]}' (only [stacks.*])")
    stacks: dict[str, StackDef] = {}
    for name, block in blocks.items():
        # one stack at a time, so an error can name the stack (msgspec elides dict keys)
        try:
            spec = msgspec.convert(block, StackDef)
        except msgspec.ValidationError as exc:
            raise _explain(p, name, exc) from None
        if not spec.title:
            spec.title = name
        _check(p, name, spec)
        stacks[name] = spec
    return stacks


def resolve(
    ref: str,
    stacks: dict[str, StackDef],
    source: str | None = None,
    *,
    named_in: str = "a file",
) -> Stack:
    """'gunicorn-sync' or 'gunicorn-sync:workers=4,threads=2' → Stack.

    Errors name `source`, by default the file the stacks were read from (a StackFile),
    and check what depends on this machine: the CPUs in `cpus`. `named_in`: where the
    reference was written, `COMMAND_LINE` or a file (a preset, a run file): a path
    param's value from a file must be its default or one the stack lists in
    `executables` (see the module docstring).
    """
    if source is None:
        source = getattr(stacks, "source", "stacks.toml")
    if not ref.isprintable():
        # a line break or an escape sequence would forge or garble the error line itself
        raise ConfigError(f"{source}: stack {ref!r}: control characters in a stack name")
    base, _, rest = ref.partition(":")
    base = base.strip()
    if base not in stacks:
        known = ", ".join(sorted(stacks))
        raise ConfigError(f"{source}: no stack '{base}' (known: {known})")
    spec = stacks[base]
    overrides: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not value:
            raise ConfigError(f"{source}: stack '{ref}': variant '{item}' is not KEY=VALUE")
        if key not in ("workers", "threads") and key not in spec.params:
            allowed = ", ".join(["workers", "threads", *spec.params])
            raise ConfigError(f"{source}: stack '{ref}': key '{key}': not tunable ({allowed})")
        problem = check_value(spec, key, value)
        if problem:
            raise ConfigError(f"{source}: stack '{ref}': key '{key}': {problem}")
        if named_in != COMMAND_LINE:
            problem = _named_executable(spec, key, value, source)
            if problem:  # the file that named it is at fault, not the stacks file
                raise ConfigError(f"{named_in}: stack '{ref}': key '{key}': {problem}")
        overrides[key] = value
    for key in ("workers", "threads"):
        if key not in overrides:  # a stacks file's own default is held to them too
            problem = check_value(spec, key, str(getattr(spec, key)))
            if problem:
                raise ConfigError(f"{source}: stack '{base}': key '{key}': {problem}")
    if spec.cpus:
        usable = sorted(os.sched_getaffinity(0))
        missing = [c for c in spec.cpus if c not in usable]
        if missing:
            raise ConfigError(
                f"{source}: stack '{base}': key 'cpus': CPU {missing[0]} is not one this "
                f"machine lets stackrace use ({', '.join(map(str, usable))})"
            )
    name = (
        base if not overrides else f"{base}:" + ",".join(f"{k}={v}" for k, v in overrides.items())
    )
    stack = Stack(name=name, base=base, spec=spec, overrides=overrides)
    if spec.upstream is not None:
        stack = _with_upstream(stack, ref, stacks, source)
    return stack


def _named_executable(spec: StackDef, key: str, value: str, source: str) -> str | None:
    """Why a file may not name this executable (None: it may): see `resolve`."""
    if param_kind(spec, key) != "path":
        return None
    allowed = [spec.params[key], *spec.executables.get(key, [])]
    if value in allowed:
        return None
    return (
        f"names the executable {value}: only the command line (--stacks, or the picker) "
        f"may, or the stack's own list in {source} ({', '.join(allowed)})"
    )


def _with_upstream(stack: Stack, ref: str, stacks: dict[str, StackDef], source: str) -> Stack:
    """Resolve the stack's `upstream` (rendered with its params) into a Stack of its own."""
    assert stack.spec.upstream is not None
    try:
        up_ref = render(stack.spec.upstream, stack.params)
    except ConfigError as exc:
        raise ConfigError(f"{source}: stack '{ref}': key 'upstream': {exc}") from None
    up_base = up_ref.partition(":")[0].strip()
    if up_base in stacks and stacks[up_base].upstream is not None:
        # one hop only (this also stops a stack naming itself): a chain would need a port
        # per hop and says nothing the experiments ask
        raise ConfigError(
            f"{source}: stack '{ref}': key 'upstream': {up_ref!r} is itself in front of a stack"
        )
    try:
        # a stacks file's reference: a file's, never the command line's
        upstream = resolve(up_ref, stacks, source, named_in=f"key 'upstream' of '{ref}'")
    except ConfigError as exc:
        raise ConfigError(f"{source}: stack '{ref}': key 'upstream': {exc}") from None
    return Stack(
        name=stack.name,
        base=stack.base,
        spec=stack.spec,
        overrides=stack.overrides,
        upstream=upstream,
    )


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
) -> dict[str, Any]:
    """The values of a stack's placeholders; `tls`: the (certificate, key) files of a
    stack with `tls = true` (the launcher makes them, stacks.certificate)."""
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
    values.update(stack.params)
    return values


_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def render(text: str, values: dict[str, Any]) -> str:
    """Fill {word} placeholders. Other braces (nginx's `location / { … }`) stay as they are."""

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in values:
            raise ConfigError(f"unknown placeholder {{{key}}} in {text[:80]!r}")
        return str(values[key])

    return _PLACEHOLDER.sub(sub, text)
