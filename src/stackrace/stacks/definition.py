"""What a stack block is: the typed definition of `[stacks.NAME]`, and a stack as the
launcher uses it (a definition with a variant's overrides).

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

A stack that serves HTTP/2 too (the variant key `http`: stackrace.stacks.protocols):

    [stacks.NAME.http."2"]           # `NAME:http=2`: h2 over TLS, negotiated by ALPN; the
    command = [...]                  # mode's command replaces the block's (optional), its
    files = [...]                    # files replace the block's of the same `path`, its env
    env = { KEY = "value" }          # adds to the block's; {tls_cert}/{tls_key} are known
    [stacks.NAME.http.h2c]           # `NAME:http=h2c`: cleartext h2, prior knowledge
    command = [...]

A stack with a status page of its own (read once in each evidence window, `w`):

    status = "http://{host}:{status_port}/fpm-status?json"
                                     # where its server says what it is doing: PHP-FPM's
                                     # `status?json`, nginx's `stub_status`, uWSGI's stats
                                     # (`--stats {host}:{status_port} --stats-http`, or a
                                     # `tcp://` stats socket). {status_port} is a loopback
                                     # port of its own the launcher picks, known only in a
                                     # block that sets `status`: the page is never on the
                                     # load's port, so no workload reaches it. On {port}, its
                                     # path may not be a workload's. Loopback only.

A stack in front of another (nginx as a reverse proxy):

    upstream = "{backend}"           # a stack (or variant) started first, on a port of its
                                     # own, {upstream_port}; usually a param, so that
                                     # `nginx-proxy:backend=gevent-pywsgi` picks it. The
                                     # front stack serves what its upstream serves.

`title` (default: the block's name), `language`, `family` ("other") and `description`
only describe a stack: a user's block may leave them out. The placeholders a block may
use are stackrace.stacks.placeholders'; what is checked when a file is read,
stackrace.stacks.validate's; which files are read, stackrace.stacks.catalogue's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from stackrace.base.errors import StackraceError
from stackrace.settings.workloads import WORKLOADS

FAMILIES = ("sync", "threaded", "async", "greenlet", "prefork", "event-loop", "other")
# workloads a stack serves only when its `workloads` lists them (dbjson), and those that
# read the database (a stack serving one gets the database settings): stackrace.settings.workloads
OPTIONAL_WORKLOADS = tuple(name for name, w in WORKLOADS.items() if w.optional)
DB_WORKLOADS = tuple(name for name, w in WORKLOADS.items() if w.needs_db)
INTERFACES = ("wsgi", "asgi")  # what an app template (`[stacks.NAME.app]`) may serve


class ConfigError(StackraceError, ValueError):
    """A stacks file or a stack reference that cannot be used; the message says where."""

    exit_code = 2  # input that cannot be used: refused before anything starts


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


class HttpMode(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """What changes when a stack serves HTTP/2 (`[stacks.NAME.http."2"]`, `.h2c`):
    stackrace.stacks.protocols applies it. Whether the mode is TLS is the mode's own
    meaning ("2" over TLS, "h2c" in the clear), never a key of its own."""

    command: list[str] | None = None  # replaces the block's command
    files: list[FileTemplate] = []  # replace the block's files of the same path (or add)
    env: dict[str, str] = {}  # added to the block's env


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
    # its own status page's URL (placeholders allowed; loopback), read in evidence windows
    status: str | None = None
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
    # the HTTP/2 modes it serves, "2" (over TLS) and "h2c": stackrace.stacks.protocols
    http: dict[str, HttpMode] = {}


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
    def http(self) -> str:
        """The protocol it serves in this variant: "1.1", "2" (h2 over TLS) or "h2c"."""
        return self.overrides.get("http", "1.1")

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
