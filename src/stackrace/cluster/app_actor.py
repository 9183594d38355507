"""`AppHost`: the Ray actor on the app node that starts, watches, samples and stops stacks.

It wraps the same `stackrace.stacks.launcher.Launcher` a local run uses, on its node, so
every guarantee holds there unchanged: free port, own session, ready at the first 200,
log file and tail, SIGTERM then SIGKILL, and nothing left behind — children get
PR_SET_PDEATHSIG and the launcher's watchdog kills every recorded session when this
actor's process dies. That is how the stacks die with the driver: Ray kills a driver's
actors when the driver dies, and the watchdog does the rest. The watchdog is detached
(not this process's child): Ray kills a dead actor's children, and would kill it too.

Stacks are started from the actor's event-loop thread (async methods), which lives as
long as the actor: the kernel ties PR_SET_PDEATHSIG to the thread that forked.

The actor watches its driver as the driver watches it: while stacks run, the driver
asks for their status twice a second; when no call has come for `lost_after` seconds
(this host cut off, or the driver gone where Ray cannot tell it yet), it stops every
stack — the driver has declared this host lost by then, and nothing may keep serving a
race nobody counts. It stays usable: the next start works as the first did.

`DbHost` runs the private MariaDB (scoped to its process, so it stops with the actor)
on the db node.

Plain classes; `stackrace.cluster.run` makes them actors with `ray.remote`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stackrace.cluster.hostinfo import HostInfo, current_node_id, normal_priority, this_host
from stackrace.stacks.availability import availability
from stackrace.stacks.definition import Stack
from stackrace.stacks.launcher import Launcher
from stackrace.stacks.placeholders import HOST
from stackrace.stacks.running import LaunchError, RunningStack
from stackrace.stacks.sampler import ResourceSample, TreeSampler

if TYPE_CHECKING:
    from stackrace.db import ManagedMariaDB


@dataclass(frozen=True)
class StackStatus:
    """One stack as the driver sees it, a snapshot taken on the app node."""

    name: str
    state: str  # starting | ready | crashed | failed | stopped (stacks.running)
    url: str
    exit_code: int | None
    error: str | None
    root_pids: tuple[int, ...]
    sample: ResourceSample | None = None


@dataclass(frozen=True)
class StartReply:
    status: StackStatus | None  # None: it did not start
    error: str = ""
    log_tail: str = ""


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    available: bool
    reason: str


def _status(rs: RunningStack, sample: ResourceSample | None = None) -> StackStatus:
    return StackStatus(
        name=rs.name,
        state=rs.state,
        url=rs.url,
        exit_code=rs.exit_code,
        error=rs.error,
        root_pids=tuple(rs.root_pids),
        sample=sample,
    )


class AppHost:
    def __init__(self, node_id: str, host: str = HOST, lost_after: float | None = None) -> None:
        self.node_id = node_id
        self.lost_after = lost_after
        self.orphaned = ""  # why it stopped its stacks on its own, last time
        self._last_call = time.monotonic()
        self._watchdog: asyncio.Task[None] | None = None
        # detach_watchdog: Ray SIGKILLs a dead actor's child processes, which would take
        # the launcher's watchdog with them before it killed the servers' own workers
        self.launcher = Launcher(host=host, detach_watchdog=True)
        # a sampler per stack, read by every status call (the panes' and bench's figures)
        self._status_samplers: dict[str, TreeSampler] = {}

    async def ready(self) -> HostInfo:
        normal_priority()  # this thread starts the stacks: see hostinfo.normal_priority
        return this_host(current_node_id())

    def _called(self) -> None:
        self._last_call = time.monotonic()

    async def _watch_driver(self, lost_after: float) -> None:
        while True:
            await asyncio.sleep(min(0.5, lost_after / 4))
            silent = time.monotonic() - self._last_call
            stacks = self.launcher.running.values()
            running = any(rs.state in ("starting", "ready") for rs in stacks)
            if running and silent > lost_after:
                self.orphaned = f"no word from the driver for {silent:.1f}s: every stack stopped"
                with contextlib.suppress(Exception):
                    await self.launcher.stop_all()

    def catalog(self, stacks: list[Stack]) -> list[CatalogEntry]:
        """Which of these stacks can start on this node (binaries, builds), and why not."""
        out = []
        for stack in stacks:
            try:
                a = availability(stack)
                out.append(CatalogEntry(stack.name, a.available, a.reason))
            except Exception as exc:  # a broken definition is reported, not fatal
                out.append(CatalogEntry(stack.name, False, str(exc)))
        return out

    def set_env(self, env: dict[str, str]) -> None:
        """Add to every later stack's environment (the database settings)."""
        self.launcher.extra_env.update(env)

    async def start(self, stack: Stack) -> StartReply:
        self._called()
        normal_priority()
        if self.lost_after and self._watchdog is None:
            self._watchdog = asyncio.create_task(self._watch_driver(self.lost_after))
        try:
            rs = await self.launcher.start(stack)
        except LaunchError as exc:
            return StartReply(None, str(exc).split("\n")[0], exc.log_tail)
        return StartReply(_status(rs))

    def status(self, sample: bool = False) -> list[StackStatus]:
        """Every stack's state (crashes noticed now), with a resource sample of each
        ready one when asked."""
        self._called()
        self.launcher.poll()
        out = []
        for rs in self.launcher.running.values():
            s = None
            if sample and rs.state == "ready":
                sampler = self._status_samplers.get(rs.name)
                if sampler is None:
                    sampler = self._status_samplers[rs.name] = TreeSampler(rs.root_pids)
                s = sampler.sample()
            out.append(_status(rs, s))
        return out

    def log_tail(self, name: str, lines: int = 20) -> str:
        self._called()
        rs = self.launcher.running.get(name)
        return rs.log_tail(lines) if rs is not None else ""

    async def stop(self, name: str) -> StackStatus | None:
        self._called()
        rs = self.launcher.running.get(name)
        if rs is None:
            return None
        await self.launcher.stop(rs)
        self._status_samplers.pop(name, None)
        return _status(rs)

    async def stop_all(self) -> None:
        self._called()
        await self.launcher.stop_all()

    def close(self) -> None:
        """After stop_all: release the watchdog (it has nothing left to kill)."""
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        self.launcher.close()


class DbHost:
    """The private MariaDB on the db node, scoped to this actor's process."""

    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        self._db: ManagedMariaDB | None = None

    async def ready(self) -> HostInfo:
        return this_host(current_node_id())

    async def start(self, rows: int) -> dict[str, str]:
        """Start and seed it (if needed); the environment the stacks connect with."""
        # the database (pymysql) only on an app node that serves it
        from stackrace.db import ManagedMariaDB, db_env  # lazy: keeps the app host's start fast

        normal_priority()  # MariaDB inherits it
        if self._db is None:
            self._db = ManagedMariaDB(scoped=True)
        settings = await self._db.ensure_ready_async(rows=rows)
        return db_env(settings, rows)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
