"""stacks.toml → typed, validated stack definitions.

Every error names the file, the stack and the key, in one line:

    stacks.toml: stack 'gunicorn-sync': key 'workers': expected `int`, got `str`

A stack block (see stacks.toml for the full set and README "Adding a stack"):

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

Optional keys for what a stack serves and what verify proves about it:

    db = true                        # serves /db (gets the database settings); false: not
    workloads = ["dbjson"]           # optional workloads it serves too (stackrace.workloads)
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
it: a checkout's own, or a package's working copy (stackrace.paths says where).

Which file: `--stacks-file`, else ./stacks.toml, else ~/.config/stackrace/stacks.toml
($XDG_CONFIG_HOME), else the one shipped with stackrace (`find_stacks_file`).

Checked when the file is read: types and unknown keys, names, family, workers/threads
≥ 1, ready_timeout/stop_timeout > 0, cpus non-empty without negatives or repeats,
placeholders. Checked when a stack is chosen (`resolve`), because it depends on the
machine rather than the file: every CPU in `cpus` is one this process may use.

Variants: "NAME:workers=4,threads=8" anywhere a stack name is accepted. A variant's value
may itself be a stack with one override: `nginx-proxy:backend=gunicorn-sync:workers=4`.
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
from typing import Any

import msgspec

from stackrace import paths
from stackrace.workloads import WORKLOADS

FAMILIES = ("sync", "threaded", "async", "greenlet", "prefork", "event-loop", "other")
HOST = "127.0.0.1"
# workloads a stack serves only when its `workloads` lists them (dbjson), and those that
# read the database (a stack serving one gets the database settings): stackrace.workloads
OPTIONAL_WORKLOADS = tuple(name for name, w in WORKLOADS.items() if w.optional)
DB_WORKLOADS = tuple(name for name, w in WORKLOADS.items() if w.needs_db)
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_MEMORY = re.compile(r"^\d+[KMG]?$")


class ConfigError(ValueError):
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


class Process(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    command: list[str]
    leaves_group: bool = False
    ready_path: str | None = None
    env: dict[str, str] = {}


class FileTemplate(msgspec.Struct, forbid_unknown_fields=True):
    path: str
    template: str


class StackDef(msgspec.Struct, forbid_unknown_fields=True):
    title: str
    language: str
    family: str
    command: list[str]
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
    upstream: str | None = None  # a stack started first that this one forwards to
    tls: bool = False  # serves HTTPS with {tls_cert}/{tls_key} (stacks.certificate)
    facts: str | None = None  # path of a JSON object of facts the app reports on itself
    expect: dict[str, str] = {}  # facts `stackrace verify` must find (placeholders allowed)


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
            known = ", ".join(OPTIONAL_WORKLOADS)
            raise bad("workloads", f"{w!r} is not an optional workload ({known})")
        if w in DB_WORKLOADS and not spec.db:
            raise bad("workloads", f"{w!r} reads the database, but the stack says db = false")
    for key, allowed in spec.choices.items():
        if key not in spec.params:
            raise bad(f"choices.{key}", "not a key of params")
        if spec.params[key] not in allowed:
            raise bad(f"choices.{key}", f"the default {spec.params[key]!r} is not among {allowed}")
    if spec.facts is not None and not spec.facts.startswith("/"):
        raise bad("facts", "must be a path starting with '/'")


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
    """The stacks of one file, by name; `source` is the file as error messages name it,
    `path` the file read (None: definitions recorded in a run file), `origin` why that
    file (STACKS_ORIGINS) and `sha256` its content's hash (what a saved run records)."""

    def __init__(
        self,
        stacks: dict[str, StackDef],
        source: str,
        path: Path | None = None,
        origin: str = "",
        sha256: str = "",
    ) -> None:
        super().__init__(stacks)
        self.source = source
        self.path = path
        self.origin = origin
        self.sha256 = sha256


# Why a stacks file was the one read, in the search order `find_stacks_file` follows.
GIVEN = "given with --stacks-file"
HERE = "found in this directory"
USER = "found in your config directory"
SHIPPED = "shipped with stackrace"
STACKS_ORIGINS = (GIVEN, HERE, USER, SHIPPED)


def find_stacks_file(given: str | Path | None = None) -> tuple[Path, str]:
    """The stacks file to read, and why (one of STACKS_ORIGINS), first found wins:
    `--stacks-file`, ./stacks.toml, $XDG_CONFIG_HOME/stackrace/stacks.toml, the shipped one.

    A file found is used whole (it is not merged with the shipped one): what a race ran
    is then one file a reader can open. In a checkout ./stacks.toml is the shipped file
    itself, and is named so."""
    if given:
        return Path(given), GIVEN
    shipped = paths.shipped_stacks_file()
    here = Path.cwd() / paths.STACKS_FILE
    if here.is_file():
        try:
            same = shipped.is_file() and here.samefile(shipped)
        except OSError:
            same = False
        return (shipped, SHIPPED) if same else (here, HERE)
    user = paths.user_stacks_file()
    if user.is_file():
        return user, USER
    return shipped, SHIPPED


def load_stacks(path: str | Path | None = None) -> StackFile:
    """Read and validate a stacks file (None: the search order of `find_stacks_file`);
    raise ConfigError naming file, stack and key."""
    p, origin = find_stacks_file(path)
    try:
        data = p.read_bytes()
        raw = tomllib.loads(data.decode())
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        raise ConfigError(f"{_where(p)}: no such file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{_where(p)}: not UTF-8 text ({exc.reason})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{_where(p)}: not valid TOML: {exc}") from None
    stacks = stack_defs(raw, p)
    return StackFile(stacks, _where(p), p.resolve(), origin, hashlib.sha256(data).hexdigest())


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
        _check(p, name, spec)
        stacks[name] = spec
    return stacks


def resolve(ref: str, stacks: dict[str, StackDef], source: str | None = None) -> Stack:
    """'gunicorn-sync' or 'gunicorn-sync:workers=4,threads=2' → Stack.

    Errors name `source`, by default the file the stacks were read from (a StackFile),
    and check what depends on this machine: the CPUs in `cpus`.
    """
    if source is None:
        source = getattr(stacks, "source", "stacks.toml")
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
        if key in ("workers", "threads"):
            if not value.isdigit() or int(value) < 1:
                raise ConfigError(
                    f"{source}: stack '{ref}': key '{key}': must be a whole number >= 1"
                )
        elif key not in spec.params:
            allowed = ", ".join(["workers", "threads", *spec.params])
            raise ConfigError(f"{source}: stack '{ref}': key '{key}': not tunable ({allowed})")
        elif key in spec.choices and value not in spec.choices[key]:
            raise ConfigError(
                f"{source}: stack '{ref}': key '{key}': {value!r} is not one of "
                f"{', '.join(spec.choices[key])}"
            )
        overrides[key] = value
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
        upstream = resolve(up_ref, stacks, source)
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
    in, or the PyPy venv (stackrace.paths says where it lives)."""
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
    values: dict[str, Any] = {
        "host": host,  # 127.0.0.1, except on a cluster's app node (see stackrace.cluster)
        "port": port,
        "workers": stack.workers,
        "threads": stack.threads,
        "apps": paths.apps_dir(),
        "root": paths.work_root(),
        "run_dir": run_dir,
        "venv_bin": venv_bin(stack.spec.needs.venv),
        "python": venv_bin(stack.spec.needs.venv) / "python",
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
