"""Stacks from stacks.toml as race members: the core's `StackSource` over the launcher.

`StacksFileSource.start` returns at once with a `LaunchedStack` in the STARTING state; the
launch (which waits for the stack's first HTTP 200) runs in a task, so the app shows
"starting" while other stacks already race, and bench waits with `RaceCore.wait_ready`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from stackrace.db import ManagedMariaDB
from stackrace.db.watch import DbWatch
from stackrace.race.core.members import StackChoice, StackHandle
from stackrace.race.core.placement import placed
from stackrace.race.core.state import StackState
from stackrace.settings.parsers import COMMAND_LINE
from stackrace.stacks import protocols
from stackrace.stacks.availability import availability
from stackrace.stacks.definition import Stack, StackDef
from stackrace.stacks.launcher import Launcher
from stackrace.stacks.listen import ListenState
from stackrace.stacks.logwatch import LogWatch
from stackrace.stacks.running import CRASHED, FAILED, READY, STARTING, STOPPED, RunningStack
from stackrace.stacks.sampler import ResourceSample, TreeSampler
from stackrace.stacks.signs import ServerSigns
from stackrace.stacks.tunables import tunables
from stackrace.stacks.variants import resolve

DEFAULT_STACKS = ("gunicorn-sync", "gunicorn-gevent", "uvicorn", "aiohttp")
_EXPOSURE_EVERY_S = 5.0  # how often a running stack's listeners are looked at again

_STATES = {
    READY: StackState.READY,
    STARTING: StackState.STARTING,
    STOPPED: StackState.STOPPED,
    CRASHED: StackState.CRASHED,
    FAILED: StackState.CRASHED,
}


class LaunchedStack(StackHandle):
    """A MemberHandle over one `stacks.launcher` stack."""

    def __init__(self, stack: Stack, launcher: Launcher) -> None:
        super().__init__(stack)
        self._launcher = launcher
        self.running: RunningStack | None = None
        self.error: str | None = None
        self._sampler: TreeSampler | None = None
        self._log: LogWatch | None = None
        self._exposure_at = time.monotonic()  # (the launcher looked at readiness)
        self._task = asyncio.ensure_future(self._start())

    async def _start(self) -> None:
        try:
            self.running = await self._launcher.start(self.stack)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # LaunchError, or anything the launch tripped on
            self.error = str(exc)

    @property
    def state(self) -> StackState:
        if self.error is not None:
            return StackState.CRASHED
        rs = self.running
        if rs is None:
            return StackState.STARTING
        self._launcher.poll()
        return _STATES.get(rs.state, StackState.CRASHED)

    @property
    def base_url(self) -> str:
        return self.running.url if self.running is not None else ""

    @property
    def cacert(self) -> str | None:
        rs = self.running
        return str(rs.cert) if rs is not None and rs.cert is not None else None

    def log_tail(self, lines: int = 20) -> list[str]:
        if self.running is not None:
            return self.running.log_tail(lines).splitlines()
        # a start that failed: why it failed (the first line) stays on top, above as much
        # of its log's end as fits (a long log would otherwise push the reason out)
        head, *rest = (self.error or "").splitlines() or [""]
        return [head, *rest[max(0, len(rest) - (lines - 1)) :]] if lines > 1 else [head]

    @property
    def listen_port(self) -> int | None:
        return self.running.port if self.running is not None else None

    def exposed(self) -> list[str]:
        """Its own listeners beyond loopback: looked for at readiness and every
        `_EXPOSURE_EVERY_S` after (a /proc walk of its processes' descriptors)."""
        rs = self.running
        if rs is None:
            return []
        now = time.monotonic()
        if now - self._exposure_at >= _EXPOSURE_EVERY_S:
            self._exposure_at = now
            self._launcher.check_exposure(rs)
        return list(rs.exposed)

    def signs(self, now: float, listen: ListenState | None) -> ServerSigns | None:
        if self.running is None:
            return None
        if self._log is None:
            self._log = LogWatch(self.running.log_path)
        sample = self._sampler.latest if self._sampler is not None else None
        return ServerSigns(now, listen, dict(self._log.poll()), sample.exited if sample else 0)

    def sample(self) -> ResourceSample | None:
        if self.running is None:
            return None
        if self._sampler is None:
            self._sampler = TreeSampler(self.running.root_pids)
            self._sampler.mark_before()
        return self._sampler.sample()

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task
        if self.running is not None and self.running.state in (READY, STARTING):
            await self._launcher.stop(self.running)


def stack_choice(
    name: str, spec: StackDef, available: bool, reason: str, default: bool
) -> StackChoice:
    """A stack as the picker offers it, wherever it would start (this machine, a
    cluster's app node): its settings, with its tunables and, where it serves HTTP/2,
    its protocol (the picker's `p` offers them)."""
    return StackChoice(
        id=name,
        name=spec.title,
        family=spec.family,
        available=available,
        reason=reason,
        default=default,
        description=spec.description,
        workers=spec.workers,
        threads=spec.threads,
        tunables=(*tunables(spec), *protocols.choice(spec)),
    )


class StacksFileSource:
    """The stacks of a stacks file, launched for real, and the database they share."""

    def __init__(
        self,
        stacks_file: str | None = None,
        *,
        defs: dict[str, StackDef],
        memory_max: str | None = None,
        env: dict[str, str] | None = None,
        offer: list[str] | None = None,
        defaults: tuple[str, ...] | list[str] = DEFAULT_STACKS,
    ) -> None:
        self.stacks_file = stacks_file
        # the run's stacks as resolved once (stacks/resolved.py): never read again here
        self.defs = defs
        # the stacks the picker offers (None: all), and those it preselects: with --app,
        # your app's servers, the common four of its kind chosen
        self.offer = offer
        self.defaults = tuple(defaults)
        self.memory_max = memory_max
        self.launcher = Launcher(env=env)
        self.handles: list[LaunchedStack] = []
        self.db: ManagedMariaDB | None = None
        self.watch: DbWatch | None = None

    def catalog(self) -> list[StackChoice]:
        out = []
        for name, spec in self.defs.items():
            if self.offer is not None and name not in self.offer:
                continue
            try:
                avail = availability(resolve(name, self.defs))
                ok, reason = avail.available, avail.reason
            except Exception as exc:  # a broken definition is shown, not fatal
                ok, reason = False, str(exc)
            out.append(stack_choice(name, spec, ok, reason, default=name in self.defaults))
        return out

    def resolve(self, stack_id: str) -> Stack:
        # named by the person at the keyboard (the command line, the picker); a preset's
        # names were checked as a file's when the race was set up (race/setup.py)
        return resolve(
            stack_id, self.defs, self.stacks_file or "stacks.toml", named_in=COMMAND_LINE
        )

    def start(self, stack_id: str, cpus: list[int] | None) -> LaunchedStack:
        return self.start_stack(self.resolve(stack_id), cpus)

    def start_stack(self, stack: Stack, cpus: list[int] | None) -> LaunchedStack:
        handle = LaunchedStack(placed(stack, cpus, self.memory_max), self.launcher)
        self.handles.append(handle)
        return handle

    def host_lost(self) -> str:
        return ""  # the stacks run on this machine

    async def start_database(self) -> None:
        """The db workload: start and seed the private MariaDB (scoped to this process, or
        the user's own `stackrace db up` instance) and give every stack its settings."""
        if self.db is not None:
            return
        # the database (pymysql) only for the db workload
        from stackrace.db.workload import open_for_workload_async  # lazy: keeps start-up fast

        self.db, env = await open_for_workload_async()
        self.launcher.extra_env.update(env)
        self.watch = DbWatch(self.db.settings)
        await self.watch.start()

    def database_state(self) -> str:
        """ "" while the database is fine (or unused); otherwise one line saying what."""
        if self.watch is None or self.watch.state in ("up", "unknown"):
            return ""
        return self.watch.describe()

    def use_database(self, env: dict[str, str]) -> None:
        """A database opened by the caller (bench): only its settings for the stacks."""
        self.launcher.extra_env.update(env)

    async def close(self) -> None:
        for h in self.handles:
            h._task.cancel()
        await self.launcher.stop_all()
        self.launcher.close()
        if self.watch is not None:
            await self.watch.stop()
            self.watch = None
        if self.db is not None:
            self.db.close()
            self.db = None
