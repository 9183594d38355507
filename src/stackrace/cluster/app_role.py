"""The driver's side of the app role: the stacks on the app node, through its `AppHost`.

Two shapes, for the two front ends as they are today:
- `RemoteLauncher` / `RemoteStack` / `RemoteSampler` look like `stacks.launcher.Launcher`,
  `RunningStack` and `stacks.sampler.TreeSampler` to `bench` (benchrun.py);
- `ClusterStacksLauncher` looks like `session.StacksLauncher` to the app (the session's
  `Launcher` protocol: catalog, start, stop_all, start_database).

States come from one status call every `_REFRESH_S`, made by a background task, so the
synchronous reads (`poll()`, `handle.state`) never wait on the network. The one blocking
call is `RemoteSampler.sample()`, because bench measures a stack's CPU from one call to
the next and must get the figure of that moment; bench calls it a few times per level.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from stackrace.cluster.app_actor import CatalogEntry, StackStatus, StartReply
from stackrace.cluster.load_role import first_line
from stackrace.config import ConfigError, Stack, StackDef, resolve
from stackrace.stacks.launcher import LaunchError
from stackrace.stacks.sampler import ResourceSample

_REFRESH_S = 0.5
_CALL_TIMEOUT = 30.0  # s for one call to the app host (a stop waits for the grace period)


async def call(ref: Any, timeout: float = _CALL_TIMEOUT) -> Any:
    """Await an actor call's result from any event loop (uvloop or Textual's)."""
    return await asyncio.wait_for(asyncio.wrap_future(ref.future()), timeout)


class RemoteStack:
    """A stack on the app node, as bench reads a `RunningStack`."""

    def __init__(self, status: StackStatus, stack: Stack, actor: Any) -> None:
        self.stack = stack
        self._actor = actor
        self.status = status

    name = property(lambda self: self.status.name)
    url = property(lambda self: self.status.url)
    state = property(lambda self: self.status.state)
    error = property(lambda self: self.status.error)
    exit_code = property(lambda self: self.status.exit_code)

    @property
    def root_pids(self) -> list[int]:
        """Pids on the app node (not this machine's): for messages only."""
        return list(self.status.root_pids)

    def log_tail(self, lines: int = 20) -> str:
        import ray

        try:
            return ray.get(self._actor.log_tail.remote(self.name, lines), timeout=10)
        except (ray.exceptions.RayError, TimeoutError) as exc:
            return f"(log tail unavailable: {first_line(exc)})"


class RemoteSampler:
    """A `TreeSampler` of a stack's processes on the app node (sampled there)."""

    def __init__(self, actor: Any, name: str) -> None:
        self._actor = actor
        self.name = name
        self.before: ResourceSample | None = None
        self.after: ResourceSample | None = None
        self.latest: ResourceSample | None = None

    def _get(self, mark: str) -> ResourceSample:
        import ray

        # blocking on purpose: see the module docstring
        s = ray.get(self._actor.sample.remote(self.name, mark), timeout=_CALL_TIMEOUT)
        if s is None:
            s = ResourceSample(time.monotonic(), 0, 0, 0, 0.0, 0, 0)
        self.latest = s
        return s

    def sample(self) -> ResourceSample:
        return self._get("")

    def mark_before(self) -> ResourceSample:
        self.before = self._get("before")
        return self.before

    def mark_after(self) -> ResourceSample:
        self.after = self._get("after")
        return self.after


class RemoteLauncher:
    """The stacks on the app node, as bench drives a `Launcher`."""

    def __init__(self, actor: Any, sample_in_status: bool = False) -> None:
        self.actor = actor
        self.running: dict[str, RemoteStack] = {}
        self._sample = sample_in_status
        self._refresher: asyncio.Task[None] | None = None
        self._crashed_seen: set[str] = set()
        self._closed = False

    async def __aenter__(self) -> RemoteLauncher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop_all()
        self.close()

    async def start(self, stack: Stack, port: int | None = None) -> RemoteStack:
        """Start a stack on the app node; returns when it is ready (or raises LaunchError
        with its log tail, as the local launcher does)."""
        if self._refresher is None:
            self._refresher = asyncio.create_task(self._refresh_loop())
        try:
            reply: StartReply = await call(
                self.actor.start.remote(stack), stack.spec.ready_timeout + _CALL_TIMEOUT
            )
        except Exception as exc:  # the actor or its node is gone
            raise LaunchError(f"{stack.name}: the app host failed: {first_line(exc)}") from None
        if reply.status is None:
            raise LaunchError(reply.error, reply.log_tail)
        rs = RemoteStack(reply.status, stack, self.actor)
        self.running[rs.name] = rs
        return rs

    async def _refresh_loop(self) -> None:
        while not self._closed:
            await asyncio.sleep(_REFRESH_S)
            with contextlib.suppress(Exception):  # a late or lost answer: the next one
                await self.refresh()

    async def refresh(self) -> None:
        statuses: list[StackStatus] = await call(self.actor.status.remote(self._sample))
        for st in statuses:
            rs = self.running.get(st.name)
            if rs is not None:
                rs.status = st

    def poll(self) -> list[RemoteStack]:
        """Stacks that crashed since the last poll (as of the last refresh)."""
        out = []
        for rs in self.running.values():
            if rs.state == "crashed" and rs.name not in self._crashed_seen:
                self._crashed_seen.add(rs.name)
                out.append(rs)
        return out

    async def stop(self, rs: RemoteStack) -> None:
        with contextlib.suppress(Exception):
            st = await call(self.actor.stop.remote(rs.name))
            if st is not None:
                rs.status = st

    async def stop_all(self) -> None:
        with contextlib.suppress(Exception):
            await call(self.actor.stop_all.remote())
            await self.refresh()

    def close(self) -> None:
        self._closed = True
        if self._refresher is not None:
            self._refresher.cancel()
        with contextlib.suppress(Exception):
            self.actor.close.remote()


# --- the app's launcher (session.Launcher protocol) ---------------------------------------
# The cluster package may not import the session (import-linter: the session is a front
# end's, and is being reshaped), so these mirror its types field for field: the session
# reads them by attribute only.


@dataclass(frozen=True)
class OfferedStack:
    """A stack the picker offers (session.StackChoice's fields), as found on the app node."""

    id: str
    name: str
    family: str
    available: bool = True
    reason: str = ""
    default: bool = False
    description: str = ""


@dataclass(frozen=True)
class NodeResources:
    """session.Resources' fields: memory (bytes) and CPU (% of one core) on the app node."""

    rss: int
    uss: int | None
    cpu: float


class RemoteStackHandle:
    """One stack of the app's race, on the app node (session.StackHandle protocol).

    States are the strings of session.StackState (a StrEnum, so they compare equal)."""

    def __init__(
        self, stack_id: str, name: str, family: str, launcher: RemoteLauncher, stack: Stack
    ) -> None:
        self.id = stack_id
        self.name = name
        self.family = family
        self._launcher = launcher
        self._stack = stack
        self._rs: RemoteStack | None = None
        self._error: str | None = None
        self._tail: tuple[float, str] = (0.0, "")  # (when fetched, text): see log_tail
        self._task = asyncio.ensure_future(self._start())

    async def _start(self) -> None:
        try:
            self._rs = await self._launcher.start(self._stack)
        except LaunchError as exc:
            self._error = str(exc)

    @property
    def state(self) -> str:
        if self._error is not None:
            return "crashed"
        if self._rs is None:
            return "starting"
        s = self._rs.state
        return s if s in ("ready", "starting", "stopped") else "crashed"

    @property
    def base_url(self) -> str:
        return self._rs.url if self._rs is not None else ""

    def log_tail(self, lines: int = 20) -> list[str]:
        if self._rs is None:
            return (self._error or "").splitlines()[-lines:]
        # the session asks every tick while a stack is crashed; the tail is fetched from
        # the app node (a blocking call) at most every 2 s
        fetched, text = self._tail
        if time.monotonic() - fetched > 2.0:
            text = self._rs.log_tail(max(lines, 50))
            self._tail = (time.monotonic(), text)
        return text.splitlines()[-lines:]

    def resources(self) -> NodeResources | None:
        """The latest sample the status refresh brought."""
        if self._rs is None or self._rs.status.sample is None:
            return None
        s = self._rs.status.sample
        return NodeResources(rss=s.rss, uss=s.uss, cpu=s.cpu_percent)


class ClusterStacksLauncher:
    """The app's launcher when `stackrace --cluster` runs the stacks on the app node."""

    def __init__(
        self,
        defs: dict[str, StackDef],
        remote: RemoteLauncher,
        start_db: Callable[[], Awaitable[None]] | None = None,
        defaults: tuple[str, ...] = (),
    ) -> None:
        import ray

        self.defs = defs
        self.defaults = defaults
        self.remote = remote
        self._start_db = start_db
        self.handles: list[RemoteStackHandle] = []
        stacks, broken = [], []
        for name in defs:
            try:
                stacks.append(resolve(name, defs))
            except ConfigError as exc:  # shown as unavailable, with the reason
                broken.append(CatalogEntry(name, False, str(exc)))
        # once, before the app opens: which stacks can start on the app node
        self._catalog = broken + ray.get(remote.actor.catalog.remote(stacks), timeout=_CALL_TIMEOUT)

    def catalog(self) -> list[OfferedStack]:
        out = []
        for entry in self._catalog:
            spec = self.defs[entry.name]
            out.append(
                OfferedStack(
                    id=entry.name,
                    name=spec.title,
                    family=spec.family,
                    available=entry.available,
                    reason=entry.reason,
                    default=entry.name in self.defaults,
                    description=spec.description,
                )
            )
        return out

    async def start_database(self) -> None:
        if self._start_db is not None:
            await self._start_db()

    async def start(self, stack_id: str) -> RemoteStackHandle:
        stack = resolve(stack_id, self.defs)
        spec = self.defs[stack.base]
        handle = RemoteStackHandle(stack_id, spec.title, spec.family, self.remote, stack)
        self.handles.append(handle)
        return handle

    async def stop_all(self) -> None:
        for h in self.handles:
            h._task.cancel()
        await self.remote.stop_all()
        self.remote.close()
