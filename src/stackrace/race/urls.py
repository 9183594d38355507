"""Servers stackrace did not start: `stackrace --url URL [--pid PID]`."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from stackrace.ports import pid_listening_on
from stackrace.race.core import StackState
from stackrace.stacks.sampler import ResourceSample, TreeSampler
from stackrace.workloads import WORKLOADS


@dataclass(frozen=True)
class UrlTarget:
    url: str
    pid: int | None = None
    name: str = ""

    def label(self) -> str:
        return self.name or urlsplit(self.url).netloc


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
    """A URL target as a race member: always ready, sampled when its pid is known."""

    family = "external"
    external = True

    def __init__(self, target: UrlTarget, index: int) -> None:
        self.target = target
        self.id = f"url{index}"
        self.name = target.label()
        pid = target.pid
        port = urlsplit(target.url).port
        if pid is None and port is not None:
            pid = pid_listening_on(port)
        self.pid = pid
        self._sampler = TreeSampler([pid]) if pid else None
        self._gone = False

    @property
    def state(self) -> StackState:
        return StackState.CRASHED if self._gone else StackState.READY

    @property
    def base_url(self) -> str:
        return self.target.url

    @property
    def cacert(self) -> str | None:
        return None  # not stackrace's server: --cacert / --insecure decide

    def log_tail(self, lines: int = 20) -> list[str]:
        if self._gone:
            return [f"process {self.pid} has exited"]
        return [] if self.pid else ["(not started by stackrace: no log; no pid found)"]

    def sample(self) -> ResourceSample | None:
        if self._sampler is None:
            return None
        s = self._sampler.sample()
        if s.processes == 0:
            self._gone = True
            return None
        return s

    async def stop(self) -> None:
        """Not ours to stop."""
