"""Servers stackrace did not start: `--url [NAME=]URL [--pid PID]`, in the app and bench.

A server the user started by hand is raced beside the stacks under a name: the one given
(`--url mine=http://127.0.0.1:8000`), else its `host:port`. Its figures go everywhere a
stack's do (panes, bench's tables and files, the gate, JUnit). What stackrace cannot
know without being told, it does not guess: its memory and CPU are sampled from the
process given with `--pid` (the Nth --pid goes with the Nth --url), and without one
they are "not sampled", never a process found on the port (a proxy, a container's
port forwarder or a supervisor would be measured in its place, silently).

Every value is checked before anything starts, with one line naming the option: the
URL (http://, a host, a port; a path without spaces or control characters), the name
(a short label: letters, digits and `. _ - : [ ] @ +`), no name twice, no --pid without
its --url, a --pid whose process listens on the URL's port (never stackrace or a
process above it), and the loopback guard (stackrace.base.netguard): a URL off this machine needs
--allow-remote. The flags are commands/target_args.py's, for the app, bench and tune.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from stackrace.base.errors import StackraceError
from stackrace.base.netguard import RemoteTargetError, require_loopback
from stackrace.engine.request import RequestError, parse_url
from stackrace.race.core.state import StackState
from stackrace.settings.scenario import check_path
from stackrace.settings.terms import unsampled_terms
from stackrace.settings.workloads import WORKLOADS
from stackrace.stacks.listen import ListenState
from stackrace.stacks.sampler import ResourceSample, TreeSampler
from stackrace.stacks.signs import ServerSigns

_NAME = re.compile(r"^[A-Za-z0-9\[][A-Za-z0-9._:@+\[\]-]{0,59}$")


class UrlError(StackraceError, ValueError):
    """A --url or --pid that cannot be raced; the message names the option."""

    exit_code = 2  # input that cannot be used: refused before anything starts


@dataclass(frozen=True)
class UrlTarget:
    url: str
    pid: int | None = None
    name: str = ""

    def label(self) -> str:
        return self.name or urlsplit(self.url).netloc

    @property
    def has_path(self) -> bool:
        """The URL names a path of its own (`/` alone is the server's root, a base)."""
        return urlsplit(self.url).path not in ("", "/") or bool(urlsplit(self.url).query)


def unsampled_slo(slo: str | None, urls: Sequence[UrlTarget]) -> str:
    """Why an objective cannot be held to these targets ('' when it can): a term on
    memory or CPU (settings.terms.unsampled_terms) while a URL has no --pid to sample,
    whose zeros would meet any target (report/slo.py: "only a figure measured meets")."""
    unsampled = [u.label() for u in urls if not u.pid]
    held = unsampled_terms(slo) if unsampled else []
    if not held:
        return ""
    return (
        f"--slo {slo!r}: {', '.join(repr(t) for t in held)} would never be measured: "
        f"{', '.join(unsampled)} {'is' if len(unsampled) == 1 else 'are'} not sampled "
        "(give --pid PID with each --url, or leave memory and CPU out of the SLO)"
    )


def parse_url_option(text: str) -> tuple[str, str]:
    """`NAME=http://…` or `http://…` → (name, url); the name defaults to host:port."""
    name, eq, rest = text.partition("=")
    if eq and "://" not in name:
        url = rest
        if not _NAME.match(name):
            raise UrlError(
                f"--url {text[:80]!r}: a name is up to 60 letters, digits and . _ - : [ ] @ +"
            )
    else:
        name, url = "", text
    try:
        parsed = parse_url(url)
    except RequestError as exc:
        raise UrlError(f"--url {exc}") from None
    problem = check_path(parsed.target)
    if problem:
        raise UrlError(f"--url {url[:80]!r}: {problem}")
    return name or parsed.host_header, url


def url_targets(
    urls: Sequence[str] | None,
    pids: Sequence[int] | None,
    allow_remote: bool = False,
    taken: Sequence[str] = (),
) -> list[UrlTarget]:
    """The --url targets of a command line, each checked; `taken`: names already in the
    race (stacks), which a URL may not take. UrlError or RemoteTargetError (one line)."""
    urls, pids = list(urls or []), list(pids or [])
    if len(pids) > len(urls):
        raise UrlError(
            f"--pid {pids[len(urls)]} has no --url to go with (the Nth --pid is the Nth --url's)"
        )
    out: list[UrlTarget] = []
    for i, text in enumerate(urls):
        name, url = parse_url_option(text)
        if name in taken or any(t.name == name for t in out):
            raise UrlError(
                f"--url {text[:80]!r}: the name {name!r} is taken; name it: --url NAME={url}"
            )
        pid = pids[i] if i < len(pids) else None
        parsed = parse_url(url)
        try:
            require_loopback(parsed.host, allow_remote, what=f"--url {name}")
        except RemoteTargetError as exc:
            raise UrlError(str(exc)) from None
        if pid is not None:
            problem = pid_problem(pid, parsed.port)
            if problem:
                raise UrlError(f"--pid {pid} (for --url {name}): {problem}")
        out.append(UrlTarget(url, pid, name))
    return out


def pid_problem(pid: int, port: int) -> str:
    """What is wrong with sampling `pid`'s process tree as the server on `port` ('' if
    nothing): the process itself must hold a socket listening on that port (the
    server's master does; a shell or supervisor above it does not), and it may not be
    stackrace or a process above it, whose tree holds stackrace's own engines. Anything
    else (`--pid 1`: the whole machine) would be measured in the server's place."""
    import psutil  # only with --pid: its import (~30 ms) kept out of every start-up

    if pid == os.getpid() or pid in {p.pid for p in psutil.Process().parents()}:
        return "that is stackrace or a process above it: its tree holds stackrace's own load"
    try:
        conns = psutil.Process(pid).net_connections(kind="inet")
    except psutil.NoSuchProcess:
        return "no such process"
    except psutil.AccessDenied:
        return (
            f"cannot see whether it listens on port {port} (another user's process): run "
            "stackrace as its user, or leave out --pid"
        )
    if any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in conns):
        return ""
    return (
        f"it does not listen on port {port}: give the pid of the server process that "
        "does (`ss -ltnp` shows it), or leave out --pid"
    )


def check_paths(targets: Sequence[UrlTarget], own_requests: bool) -> None:
    """With your requests (--path, --scenario, --app) each URL is a server's base: a path
    of its own would be silently replaced by them, so it is refused."""
    if not own_requests:
        return
    for t in targets:
        if t.has_path:
            base = urlsplit(t.url)
            raise UrlError(
                f"--url {t.name}: {t.url} has a path of its own, and your requests (--path, "
                f"--scenario, --app) say what to load: give its base, "
                f"--url {t.name}={base.scheme}://{base.netloc}"
            )


def target_url(base: str, workload: str, io_ms: int = 10, queries: int = 10) -> str:
    """The URL to load: the URL as given when it has a path (`/` included: that is what
    was typed), else (`http://host:port`, a launched stack's base) the workload's path.
    The picker and the pane show the URL loaded."""
    parts = urlsplit(base)
    if parts.path != "":
        return base
    path, _, query = WORKLOADS[workload].path(io_ms, queries).partition("?")
    return urlunsplit((parts.scheme, parts.netloc, path, query, ""))


class UrlHandle:
    """A URL target as a race member: always ready, sampled when its pid is given."""

    family = "external"
    external = True
    error = None  # not ours to start: a URL that stops answering fails its requests

    def __init__(self, target: UrlTarget, index: int, id: str | None = None) -> None:
        self.target = target
        # the app's panes take slugs of ids; bench keys its results by name
        self.id = id or f"url{index}"
        self.name = target.label()
        self.pid = target.pid
        self._sampler = TreeSampler([self.pid]) if self.pid else None
        self._gone = False
        self._stopped = False

    @property
    def sampled(self) -> bool:
        return self._sampler is not None

    @property
    def state(self) -> StackState:
        if self._stopped:  # out of the race: never attached again (bench's rotation)
            return StackState.STOPPED
        return StackState.CRASHED if self._gone else StackState.READY

    @property
    def base_url(self) -> str:
        return self.target.url

    @property
    def cacert(self) -> str | None:
        return None  # not stackrace's server: --cacert / --insecure decide

    @property
    def http(self) -> str:
        return "1.1"  # a URL's own server: HTTP/1.1 (`load --http2` is the engine's)

    def log_tail(self, lines: int = 20) -> list[str]:
        if self._gone:
            return [f"process {self.pid} (--pid) has exited"]
        return ["(not started by stackrace: no log)"]

    @property
    def listen_port(self) -> int | None:
        """Its port, when the server is on this machine (the kernel can show it)."""
        parts = urlsplit(self.target.url)
        local = parts.hostname in ("127.0.0.1", "localhost", "::1") or (
            parts.hostname or ""
        ).startswith("127.")
        return parts.port if local else None

    def exposed(self) -> list[str]:
        return []  # not started by stackrace: where it listens is its owner's choice

    def signs(self, now: float, listen: ListenState | None) -> ServerSigns | None:
        if listen is None:
            return None
        exited = self._sampler.latest.exited if self._sampler and self._sampler.latest else 0
        return ServerSigns(now, listen, {}, exited)

    def sample(self) -> ResourceSample | None:
        if self._sampler is None:
            return None
        s = self._sampler.sample()
        if s.processes == 0:
            self._gone = True
            return None
        return s

    async def stop(self) -> None:
        """The server is not ours to stop: it only leaves the race."""
        self._stopped = True
