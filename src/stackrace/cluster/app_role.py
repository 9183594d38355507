"""The driver's side of the app role: the stacks on the app node, through its `AppHost`.

- `RemoteLauncher` / `RemoteStack` look like `stacks.launcher.Launcher` and
  `RunningStack`;
- `ClusterStackSource` and its `RemoteMember`s are the race core's `StackStarter` and
  `MemberHandle`s (race/core/core.py): the app and bench race remote stacks as local ones.

States come from one status call every `_REFRESH_S`, made by a background task, so the
synchronous reads (`poll()`, `handle.state`) never wait on the network. The same task
watches the app host: when it has not answered for `lost_after` seconds (a partition, a
dead machine) or Ray says its actor died, the app host is lost — every stack reads
"crashed" with the reason, no call waits on it any more, and the front ends are told
(`on_lost`): bench ends the run, the app's session ends the race, both saying which host
was lost and when.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable
from typing import Any

from stackrace.cluster.app_actor import CatalogEntry, StackStatus, StartReply
from stackrace.cluster.load_role import first_line
from stackrace.race.core.members import StackChoice, StackHandle
from stackrace.race.core.placement import placed
from stackrace.race.core.stack_source import stack_choice
from stackrace.race.core.state import StackState
from stackrace.settings.parsers import COMMAND_LINE
from stackrace.stacks.definition import ConfigError, Stack, StackDef
from stackrace.stacks.listen import ListenState
from stackrace.stacks.running import LaunchError
from stackrace.stacks.sampler import ResourceSample
from stackrace.stacks.signs import ServerSigns
from stackrace.stacks.variants import resolve

_REFRESH_S = 0.5
_CALL_TIMEOUT = 30.0  # s for one call to the app host (a stop waits for the grace period)


async def call(ref: Any, timeout: float = _CALL_TIMEOUT) -> Any:
    """Await an actor call's result from any event loop (uvloop or Textual's)."""
    async with asyncio.timeout(timeout):
        return await asyncio.wrap_future(ref.future())


class RemoteStack:
    """A stack on the app node, as bench reads a `RunningStack`."""

    def __init__(
        self, status: StackStatus, stack: Stack, actor: Any, launcher: RemoteLauncher | None = None
    ) -> None:
        self.stack = stack
        self._actor = actor
        self._launcher = launcher
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
        import ray  # lazy: only with --cluster

        if self._launcher is not None and self._launcher.lost:
            return self._launcher.lost  # nothing to ask any more
        try:
            return ray.get(self._actor.log_tail.remote(self.name, lines), timeout=10)
        except (ray.exceptions.RayError, TimeoutError) as exc:
            return f"(log tail unavailable: {first_line(exc)})"


class RemoteLauncher:
    """The stacks on the app node, as bench drives a `Launcher`."""

    def __init__(
        self,
        actor: Any,
        sample_in_status: bool = False,
        where: str = "",
        lost_after: float = 10.0,
        on_lost: list[Callable[[str], None]] | None = None,
    ) -> None:
        self.actor = actor
        self.running: dict[str, RemoteStack] = {}
        self.where = where  # the app host's address, for messages
        self.lost_after = lost_after
        self.on_lost = on_lost if on_lost is not None else []
        self.lost = ""  # why the app host is lost ("" while it answers)
        self._last_answer = time.monotonic()
        self._sample = sample_in_status
        self._refresher: asyncio.Task[None] | None = None
        self._crashed_seen: set[str] = set()
        self._closed = False
        # Status answers cross the network and the background refresh overlaps stop():
        # an answer asked for before a later one was applied is stale and dropped, or a
        # stack just stopped would read "ready" again.
        self._asked = 0
        self._applied = 0

    async def __aenter__(self) -> RemoteLauncher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop_all()
        self.close()

    async def start(self, stack: Stack, port: int | None = None) -> RemoteStack:
        """Start a stack on the app node; returns when it is ready (or raises LaunchError
        with its log tail, as the local launcher does)."""
        if self.lost:
            raise LaunchError(f"{stack.name}: {self.lost}")
        if self._refresher is None:
            self._last_answer = time.monotonic()
            self._refresher = asyncio.create_task(self._refresh_loop())
        try:
            reply: StartReply = await call(
                self.actor.start.remote(stack), stack.spec.ready_timeout + _CALL_TIMEOUT
            )
        except Exception as exc:  # the actor or its node is gone
            raise LaunchError(f"{stack.name}: the app host failed: {first_line(exc)}") from None
        if reply.status is None:
            raise LaunchError(reply.error, reply.log_tail)
        rs = RemoteStack(reply.status, stack, self.actor, self)
        self.running[rs.name] = rs
        self._mark_applied()  # a status asked for during the start would say "starting"
        return rs

    def _mark_applied(self) -> None:
        """A status just came with a reply: every one asked for before it is stale."""
        self._asked += 1
        self._applied = self._asked

    async def _refresh_loop(self) -> None:
        import ray  # lazy: only with --cluster

        while not self._closed and not self.lost:
            await asyncio.sleep(_REFRESH_S)
            try:
                await self.refresh(self.lost_after)
            except ray.exceptions.ActorDiedError as exc:  # dead for good (its node, too)
                self._lose(f"its actor died: {first_line(exc)}")
            except Exception:  # a late or lost answer: the next one, unless silent too long
                silent = time.monotonic() - self._last_answer
                if silent > self.lost_after:
                    self._lose(f"no answer for {silent:.1f}s")

    def _lose(self, why: str) -> None:
        clock = time.strftime("%H:%M:%S")
        self.lost = f"the app host {self.where} was lost at {clock} ({why})"
        for rs in self.running.values():
            rs.status = dataclasses.replace(rs.status, state="crashed", error=self.lost)
        for tell in self.on_lost:
            tell(self.lost)

    async def refresh(self, timeout: float = _CALL_TIMEOUT) -> None:
        self._asked += 1
        asked = self._asked
        statuses: list[StackStatus] = await call(self.actor.status.remote(self._sample), timeout)
        self._last_answer = time.monotonic()
        if asked < self._applied:
            return
        self._applied = asked
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
        if self.lost:
            return  # nothing there answers; its stacks die with it (their watchdog)
        with contextlib.suppress(Exception):
            st = await call(self.actor.stop.remote(rs.name))
            if st is not None:
                rs.status = st
                self._mark_applied()

    async def stop_all(self) -> None:
        if self.lost:
            return
        with contextlib.suppress(Exception):
            await call(self.actor.stop_all.remote())
            await self.refresh()

    def close(self) -> None:
        self._closed = True
        if self._refresher is not None:
            self._refresher.cancel()
        with contextlib.suppress(Exception):
            self.actor.close.remote()


# --- the race core's stack source (race.core.StackStarter) ------------------------------


class RemoteMember(StackHandle):
    """One raced stack on the app node, as the race core sees a member (MemberHandle).

    Its start runs in a task (the core shows "starting" meanwhile); its state and its
    resource sample come from the launcher's status refresh, so reading them never waits
    on the network."""

    def __init__(self, source: ClusterStackSource, stack: Stack) -> None:
        super().__init__(stack)
        self._source = source
        self._rs: RemoteStack | None = None
        self._error: str | None = None
        self._tail: tuple[float, str] = (0.0, "")  # (when fetched, text): see log_tail
        self._task = asyncio.ensure_future(self._start())

    async def _start(self) -> None:
        try:
            launcher = await self._source.remote()
            self._rs = await launcher.start(self.stack)
        except LaunchError as exc:
            self.error = str(exc)
        except Exception as exc:  # the app host could not be placed or reached: say so,
            # or the member would read "starting" until bench gives up on it
            self.error = f"{self.stack.name}: {first_line(exc)}"

    @property
    def error(self) -> str | None:
        """Why it did not start, or why it crashed on the app node."""
        if self._error is None and self._rs is not None:
            return self._rs.error if self._rs.state in ("crashed", "failed") else None
        return self._error

    @error.setter
    def error(self, why: str | None) -> None:
        self._error = why

    @property
    def state(self) -> StackState:
        if self._error is not None:
            return StackState.CRASHED
        if self._rs is None:
            return StackState.STARTING
        s = self._rs.state
        if s in ("ready", "starting", "stopped"):
            return StackState(s)
        return StackState.CRASHED

    @property
    def base_url(self) -> str:
        return self._rs.url if self._rs is not None else ""

    @property
    def cacert(self) -> str | None:
        # the certificate is on the app host, not beside the load hosts' engines: a TLS
        # stack in a cluster race is verified as --cacert / --insecure say
        return None

    def log_tail(self, lines: int = 20) -> list[str]:
        if self._rs is None:
            return (self.error or "").splitlines()[-lines:]
        # asked every tick while a stack is crashed; fetched from the app node (a
        # blocking call) at most every 2 s
        fetched, text = self._tail
        if time.monotonic() - fetched > 2.0:
            text = self._rs.log_tail(max(lines, 50))
            self._tail = (time.monotonic(), text)
        return text.splitlines()[-lines:]

    listen_port = None  # on the app node: this host's kernel cannot show its socket

    def signs(self, now: float, listen: ListenState | None) -> ServerSigns | None:
        return None

    def exposed(self) -> list[str]:
        return []  # on the app node, which listens for the load nodes by design

    def sample(self) -> ResourceSample | None:
        """The latest sample the status refresh brought from the app node (≤ 0.5 s old)."""
        if self._rs is None:
            return None
        return self._rs.status.sample

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task
        if self._rs is not None and self._source.launcher is not None:
            await self._source.launcher.stop(self._rs)


class ClusterStackSource:
    """The stacks of a stacks file, started on the cluster's app node (race.core's
    StackStarter: the app's picker and bench both drive it)."""

    def __init__(
        self,
        run: Any,
        defs: dict[str, StackDef],
        defaults: tuple[str, ...] = (),
        memory_max: str | None = None,
    ) -> None:
        self.run = run
        self.defs = defs
        self.defaults = defaults
        self.memory_max = memory_max
        self.launcher: RemoteLauncher | None = None
        self._env: dict[str, str] = {}
        self._lock = asyncio.Lock()
        self._catalog: list[CatalogEntry] | None = None
        self.members: list[RemoteMember] = []

    async def remote(self) -> RemoteLauncher:
        """The app node's launcher, made once, with the environment given so far."""
        async with self._lock:
            if self.launcher is None:
                self.launcher = await self.run.launcher(self._env, sample_in_status=True)
            return self.launcher

    def catalog(self) -> list[StackChoice]:
        import ray  # lazy: only with --cluster

        if self._catalog is None:
            stacks, broken = [], []
            for name in self.defs:
                try:
                    stacks.append(resolve(name, self.defs))
                except ConfigError as exc:  # shown as unavailable, with the reason
                    broken.append(CatalogEntry(name, False, str(exc)))
            # once: which stacks can start on the app node
            actor = self.run.app_host()
            self._catalog = broken + ray.get(actor.catalog.remote(stacks), timeout=_CALL_TIMEOUT)
        return [
            stack_choice(
                e.name, self.defs[e.name], e.available, e.reason, default=e.name in self.defaults
            )
            for e in self._catalog
        ]

    def start(self, stack_id: str, cpus: list[int] | None) -> RemoteMember:
        # named by the front end's user and checked there (a preset's as a file's)
        return self.start_stack(resolve(stack_id, self.defs, named_in=COMMAND_LINE), cpus)

    def start_stack(self, stack: Stack, cpus: list[int] | None) -> RemoteMember:
        member = RemoteMember(self, placed(stack, cpus, self.memory_max))
        self.members.append(member)
        return member

    def use_database(self, env: dict[str, str]) -> None:
        self._env.update(env)

    def host_lost(self) -> str:
        return self.launcher.lost if self.launcher is not None else ""

    def database_state(self) -> str:
        return ""  # the db node's database is not watched from here

    async def start_database(self) -> None:
        """The db workload: the managed MariaDB on the db node; every stack gets its
        settings (the app host is told before any stack starts)."""
        self._env.update(await self.run.database_env())

    async def close(self) -> None:
        for m in self.members:
            m._task.cancel()
        if self.launcher is not None:
            await self.launcher.stop_all()
            self.launcher.close()
