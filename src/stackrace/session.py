"""A race session: launcher + engine orchestrated for a live display, with no UI in it.

The TUI (and anything headless) drives one `Session`:

    session = Session(engine=Engine(), launcher=launcher)
    await session.start(RacePlan(stacks=("uvicorn", "gunicorn-sync"), workload=Workload("io")))
    view = await session.poll()            # call ~4x/s: readiness, targets, levels, ramp
    await session.set_concurrency(200)     # every running stack at once, live
    session.start_ramp()                   # step up through the levels, mark breaking points
    await session.stop()                   # stop the load and every stack

`poll()` returns a `SessionView`: one `PaneView` per stack or URL target with the engine's
latest figures, its state, resources and breaking point. All decisions live here or in
`stackrace.ramp`; the UI only draws views and forwards commands.

The engine and the launcher are passed in behind small protocols (`LoadEngine`,
`Launcher`) so a synthetic, deterministic pair can stand in for tests and benchmarks.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

import psutil

from stackrace.engine.histogram import LatencyHistogram
from stackrace.engine.model import (
    BodyCheck,
    EngineSnapshot,
    TargetSnapshot,
    TargetSpec,
)
from stackrace.ramp import BreakingPoint, LevelLog, Ramp, StepResult, peak
from stackrace.workloads import WORKLOADS as WORKLOAD_DEFS

# ---------------------------------------------------------------------------------------
# What the UI shows and sends


class StackState(StrEnum):
    STARTING = "starting"
    WARMING = "warming"
    READY = "ready"
    CRASHED = "crashed"
    STOPPED = "stopped"


@dataclass(frozen=True)
class Resources:
    """Memory of a stack's whole process tree (bytes) and its CPU (% of one core)."""

    rss: int
    uss: int | None
    cpu: float


@dataclass(frozen=True)
class StackChoice:
    """One stack the picker offers."""

    id: str
    name: str
    family: str
    available: bool = True
    reason: str = ""  # why it is not available
    default: bool = False
    description: str = ""


# the picker offers every workload of the contract; optional ones (dbjson, served by some
# stacks only) are for `bench` until the picker can refuse the stacks that lack them
WORKLOADS: tuple[str, ...] = tuple(n for n, w in WORKLOAD_DEFS.items() if not w.optional)


@dataclass(frozen=True)
class Workload:
    """The workload the user chose, with its parameters; what each workload *is* (path,
    body check, content type) is `stackrace.workloads.WORKLOADS[name]`."""

    name: str = "hello"
    io_delay_ms: int = 10  # io: how long each request waits
    db_queries: int = 1  # db: queries per request

    @property
    def needs_db(self) -> bool:
        return self.name == "db"

    def label(self) -> str:
        if self.name == "io":
            return f"io {self.io_delay_ms}ms"
        if self.name == "db":
            return f"db ×{self.db_queries}"
        return self.name


@dataclass(frozen=True)
class UrlTarget:
    """A server stackrace did not start: `stackrace --url URL [--pid PID]`."""

    url: str
    pid: int | None = None
    name: str = ""

    def label(self) -> str:
        return self.name or urlsplit(self.url).netloc


@dataclass(frozen=True)
class RacePlan:
    stacks: tuple[str, ...] = ()
    urls: tuple[UrlTarget, ...] = ()
    workload: Workload = field(default_factory=Workload)
    concurrency: int = 10
    rate: float | None = None  # req/s per stack; None = closed loop
    rate_connections: int = 200  # connections per stack that carry the rate in rate mode


@dataclass
class PaneView:
    """Everything one pane shows for one tick."""

    id: str
    name: str
    family: str
    state: StackState
    target: TargetSnapshot | None = None
    resources: Resources | None = None
    baseline: Resources | None = None  # before load
    breaking: BreakingPoint | None = None
    log_tail: list[str] = field(default_factory=list)
    external: bool = False


@dataclass
class SessionView:
    seq: int
    panes: list[PaneView]
    concurrency: int
    rate: float | None
    engine_cpu: float = 0.0
    saturated: bool = False
    ramp: str | None = None  # "ramp 3/11 c=20" while a ramp runs
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SummaryRow:
    id: str
    name: str
    peak: StepResult | None
    breaking: BreakingPoint | None
    mem_before: Resources | None
    mem_after: Resources | None
    mem_peak: int  # highest RSS seen, bytes


# ---------------------------------------------------------------------------------------
# What the session needs from the engine and the launcher


class LoadEngine(Protocol):
    """The part of `stackrace.engine.client.Engine` a session drives."""

    latest: EngineSnapshot | None
    errors: list[str]

    async def start(self) -> None: ...
    async def stop(self) -> EngineSnapshot | None: ...
    async def add_target(self, spec: TargetSpec) -> None: ...
    async def remove_target(self, target_id: str) -> None: ...
    async def set_concurrency(self, n: int, target_id: str | None = None) -> None: ...
    async def set_rate(self, rate: float | None, target_id: str | None = None) -> None: ...
    def reset_totals(self, warmup: float = 0.0) -> None: ...
    def total_histogram(self, target_id: str, uncorrected: bool = False) -> LatencyHistogram: ...


class StackHandle(Protocol):
    """One launched stack, as the session sees it."""

    id: str
    name: str
    family: str

    @property
    def state(self) -> StackState: ...
    @property
    def base_url(self) -> str: ...
    def log_tail(self, lines: int = 20) -> list[str]: ...
    def resources(self) -> Resources | None: ...


class Launcher(Protocol):
    def catalog(self) -> list[StackChoice]: ...
    async def start(self, stack_id: str) -> StackHandle: ...
    async def stop_all(self) -> None: ...


# Hook for the managed MariaDB (another issue): called before a db workload starts.
DbStarter = Callable[[], object]  # may return an awaitable


# ---------------------------------------------------------------------------------------
# Targets stackrace did not start


def pid_listening_on(port: int) -> int | None:
    """The pid of the process listening on a TCP port, when we may see it."""
    with contextlib.suppress(psutil.Error, OSError):
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
                return conn.pid
    return None


class ProcessSampler:
    """CPU and memory of a process and its children, for panes of URL targets.

    USS reads /proc/PID/smaps, which costs milliseconds for a large process: it is read
    every `uss_every` samples and the last figure reused in between.
    """

    def __init__(self, pid: int, uss_every: int = 4) -> None:
        self.pid = pid
        self.uss_every = uss_every
        self._n = 0
        self._uss: int | None = None
        self._procs: dict[int, psutil.Process] = {}
        self.alive = True

    def _tree(self) -> list[psutil.Process]:
        try:
            root = self._procs.get(self.pid) or psutil.Process(self.pid)
            members = [root, *root.children(recursive=True)]
        except psutil.Error:
            self.alive = False
            return []
        # keep Process objects so cpu_percent() has a previous sample to compare with
        self._procs = {p.pid: self._procs.get(p.pid, p) for p in members}
        return list(self._procs.values())

    def sample(self) -> Resources | None:
        procs = self._tree()
        if not procs:
            return None
        rss = 0
        cpu = 0.0
        read_uss = self._n % self.uss_every == 0
        uss = 0
        for p in procs:
            with contextlib.suppress(psutil.Error):
                cpu += p.cpu_percent(None)
                if read_uss:
                    info = p.memory_full_info()
                    rss += info.rss
                    uss += info.uss
                else:
                    rss += p.memory_info().rss
        if read_uss:
            self._uss = uss
        self._n += 1
        return Resources(rss=rss, uss=self._uss, cpu=cpu)


class UrlHandle:
    """A StackHandle for a URL target: always ready, sampled when its pid is known."""

    family = "external"

    def __init__(self, target: UrlTarget, index: int) -> None:
        self.target = target
        self.id = f"url{index}"
        self.name = target.label()
        parts = urlsplit(target.url)
        pid = target.pid
        if pid is None and parts.port is not None:
            pid = pid_listening_on(parts.port)
        self.pid = pid
        self._sampler = ProcessSampler(pid) if pid else None
        self._last: Resources | None = None

    @property
    def state(self) -> StackState:
        if self._sampler is not None and not self._sampler.alive:
            return StackState.CRASHED
        return StackState.READY

    @property
    def base_url(self) -> str:
        return self.target.url

    def log_tail(self, lines: int = 20) -> list[str]:
        if self._sampler is not None and not self._sampler.alive:
            return [f"process {self.pid} has exited"]
        return [] if self.pid else ["(not started by stackrace: no log; no pid found)"]

    def resources(self) -> Resources | None:
        if self._sampler is not None:
            self._last = self._sampler.sample() or self._last
        return self._last


def target_url(base: str, workload: Workload) -> str:
    """The URL to load: the workload's path on a bare base URL, else the URL as given."""
    parts = urlsplit(base)
    if parts.path not in ("", "/"):
        return base
    path, query = workload_path(workload)
    return urlunsplit((parts.scheme, parts.netloc, path, query, ""))


# ---------------------------------------------------------------------------------------
# A chosen workload's endpoint and body check come from stackrace.workloads


def workload_path(workload: Workload) -> tuple[str, str]:
    """(path, query) of a workload's endpoint."""
    full = WORKLOAD_DEFS[workload.name].path(
        io_ms=workload.io_delay_ms, queries=workload.db_queries
    )
    path, _, query = full.partition("?")
    return path, query


def workload_check(workload: Workload) -> BodyCheck | None:
    """The body check every stack's answer must pass."""
    return WORKLOAD_DEFS[workload.name].check(queries=workload.db_queries)


# ---------------------------------------------------------------------------------------
# The session


@dataclass
class _Pane:
    handle: StackHandle
    external: bool
    added: bool = False  # its engine target exists
    baseline: Resources | None = None
    resources: Resources | None = None
    mem_peak: int = 0


class Session:
    """Starts stacks, loads them when ready, tracks levels, runs ramps."""

    def __init__(
        self,
        engine: LoadEngine,
        launcher: Launcher | None = None,
        clock: Callable[[], float] = time.monotonic,
        start_db: DbStarter | None = None,
    ) -> None:
        self.engine = engine
        self.launcher = launcher
        self.clock = clock
        self.start_db = start_db
        self.plan = RacePlan()
        self.levels = LevelLog()
        self.ramp: Ramp | None = None
        self._panes: dict[str, _Pane] = {}
        self._engine_started = False
        self._last_seq = -1
        self.errors: list[str] = []
        self.concurrency = 10
        self.rate: float | None = None

    # --- lifecycle ------------------------------------------------------------------

    async def start(self, plan: RacePlan) -> None:
        """Start the engine and every chosen stack; URL targets are loaded at once."""
        self.plan = plan
        self.concurrency = plan.concurrency
        self.rate = plan.rate
        if plan.workload.needs_db and self.start_db is not None:
            started = self.start_db()
            if inspect.isawaitable(started):
                await started
        await self.engine.start()
        self._engine_started = True
        for i, url in enumerate(plan.urls):
            handle = UrlHandle(url, i + 1)
            self._panes[handle.id] = _Pane(handle, external=True)
        if plan.stacks and self.launcher is None:
            self.errors.append("no launcher: only --url targets can be loaded")
        elif self.launcher is not None:
            for stack_id in plan.stacks:
                try:
                    handle = await self.launcher.start(stack_id)
                except Exception as exc:  # a stack that cannot start must not stop the race
                    self.errors.append(f"{stack_id}: {exc}")
                    continue
                self._panes[handle.id] = _Pane(handle, external=False)
        await self.poll()

    async def stop(self) -> None:
        self.ramp = None
        if self._engine_started:
            await self.engine.stop()
            self._engine_started = False
        if self.launcher is not None:
            await self.launcher.stop_all()

    # --- commands -------------------------------------------------------------------

    def _spec(self, pane: _Pane) -> TargetSpec:
        workload = self.plan.workload
        rate_mode = self.rate is not None
        url = target_url(pane.handle.base_url, workload)
        return TargetSpec(
            id=pane.handle.id,
            url=url,
            # a URL given with its own path is not necessarily one of our apps: no check
            check=workload_check(workload) if url != pane.handle.base_url else None,
            concurrency=self.plan.rate_connections if rate_mode else self.concurrency,
            rate=self.rate,
        )

    async def set_concurrency(self, n: int) -> None:
        """Connections per stack (closed loop), or req/s per stack in rate mode."""
        if self.rate is not None:
            await self.set_rate(float(n))
            return
        self.concurrency = n
        if any(p.added for p in self._panes.values()):
            await self.engine.set_concurrency(n)
            self._new_level()

    async def set_rate(self, rate: float | None) -> None:
        """Constant rate per stack in req/s, or None for closed loop."""
        was_closed = self.rate is None
        self.rate = rate
        if not any(p.added for p in self._panes.values()):
            return
        if rate is not None and was_closed:
            await self.engine.set_concurrency(self.plan.rate_connections)
        await self.engine.set_rate(rate)
        if rate is None:
            await self.engine.set_concurrency(self.concurrency)
        self._new_level()

    def _new_level(self) -> None:
        # The running totals become the new level's figures; the first half second is
        # left out so connections opening (or retiring) do not blur the level.
        self.engine.reset_totals(warmup=0.5)

    def start_ramp(self, top: int = 2000, dwell: float = 3.0) -> None:
        """Step the load from 1 up to `top`, then go back to the current level."""
        self.levels.clear()
        self.ramp = Ramp.from_level(1, top=top, dwell=dwell, restore=self.level)

    def stop_ramp(self) -> None:
        self.ramp = None

    @property
    def level(self) -> int:
        return round(self.rate) if self.rate is not None else self.concurrency

    # --- polling --------------------------------------------------------------------

    async def poll(self) -> SessionView:
        """Advance everything one tick and return what to show. Call it ~4x/s."""
        for pane in self._panes.values():
            pane.resources = pane.handle.resources()
            if pane.resources is not None:
                pane.mem_peak = max(pane.mem_peak, pane.resources.rss)
            state = pane.handle.state
            if not pane.added and state in (StackState.READY, StackState.WARMING):
                pane.baseline = pane.resources
                await self._add(pane)
            elif pane.added and state == StackState.CRASHED and not pane.external:
                await self._remove(pane)
        snap = self.engine.latest
        if snap is not None and snap.seq != self._last_seq:
            self._last_seq = snap.seq
            self.levels.feed(snap)
        await self._advance_ramp()
        return self.view()

    async def _add(self, pane: _Pane) -> None:
        try:
            await self.engine.add_target(self._spec(pane))
        except Exception as exc:  # refused by the engine: show it, keep the others going
            self.errors.append(f"{pane.handle.name}: {exc}")
        pane.added = True

    async def _remove(self, pane: _Pane) -> None:
        with contextlib.suppress(Exception):
            await self.engine.remove_target(pane.handle.id)
        pane.added = False

    async def _advance_ramp(self) -> None:
        if self.ramp is None:
            return
        ids = [pid for pid, p in self._panes.items() if p.added]
        all_broken = bool(ids) and all(self.levels.breaking_point(i) for i in ids)
        level = self.ramp.advance(self.clock(), all_broken)
        if level is not None:
            await self.set_concurrency(level)
        if self.ramp.done:
            self.ramp = None

    def view(self) -> SessionView:
        snap = self.engine.latest
        panes = []
        for pid, p in self._panes.items():
            target = snap.target(pid) if snap is not None and p.added else None
            state = p.handle.state
            panes.append(
                PaneView(
                    id=pid,
                    name=p.handle.name,
                    family=p.handle.family,
                    state=state,
                    target=target,
                    resources=p.resources,
                    baseline=p.baseline,
                    breaking=self.levels.breaking_point(pid),
                    log_tail=p.handle.log_tail(12) if state == StackState.CRASHED else [],
                    external=p.external,
                )
            )
        ramp = None
        if self.ramp is not None and self.ramp.level is not None:
            ramp = f"ramp {self.ramp.progress()} → {self.ramp.level}"
        return SessionView(
            seq=snap.seq if snap is not None else 0,
            panes=panes,
            concurrency=self.concurrency,
            rate=self.rate,
            engine_cpu=snap.engine_cpu if snap is not None else 0.0,
            saturated=snap.saturated if snap is not None else False,
            ramp=ramp,
            errors=[*self.errors, *self.engine.errors],
        )

    # --- on demand ------------------------------------------------------------------

    def percentile_curve(self, pane_id: str, points: Sequence[float]) -> list[tuple[float, int]]:
        """Latency at each percentile, at the current level (empty before any data)."""
        pane = self._panes.get(pane_id)
        if pane is None or not pane.added:
            return []
        pts = list(points)
        try:
            fast = getattr(self.engine, "total_percentiles", None)
            if fast is not None:
                values = fast(pane_id, pts)
                return list(zip(pts, values, strict=True)) if any(values) else []
            hist = self.engine.total_histogram(pane_id)
        except KeyError:
            return []
        if hist.total == 0:
            return []
        return hist.percentile_curve(pts)

    def log_text(self, pane_id: str, lines: int = 200) -> str:
        pane = self._panes.get(pane_id)
        if pane is None:
            return ""
        return "\n".join(pane.handle.log_tail(lines))

    def summary(self) -> list[SummaryRow]:
        rows = []
        for pid, p in self._panes.items():
            steps = self.levels.results(pid)
            rows.append(
                SummaryRow(
                    id=pid,
                    name=p.handle.name,
                    peak=peak(steps),
                    breaking=self.levels.breaking_point(pid),
                    mem_before=p.baseline,
                    mem_after=p.resources,
                    mem_peak=p.mem_peak,
                )
            )
        return rows


# ---------------------------------------------------------------------------------------
# LAUNCHER GLUE — the one place that knows stackrace.stacks and stackrace.config.

DEFAULT_STACKS = ("gunicorn-sync", "gunicorn-gevent", "uvicorn", "aiohttp")
_SAMPLE_EVERY = 1.0  # seconds between resource samples of one stack (smaps reads cost)


class LaunchedStack:
    """A StackHandle over stackrace.stacks: STARTING at once, the launch runs in a task.

    `Launcher.start` waits for readiness; running it in a task lets the pane show
    "starting" while the other stacks already race.
    """

    def __init__(self, stack_id: str, name: str, family: str, launcher: object, stack: object):
        self.id = stack_id
        self.name = name
        self.family = family
        self._launcher = launcher
        self._running: object | None = None
        self._error: str | None = None
        self._sampler: object | None = None
        self._sampled_at = 0.0
        self._last: Resources | None = None
        import asyncio

        self._task = asyncio.ensure_future(self._start(stack))

    async def _start(self, stack: object) -> None:
        try:
            self._running = await self._launcher.start(stack)  # type: ignore[attr-defined]
        except Exception as exc:
            self._error = str(exc)

    @property
    def state(self) -> StackState:
        if self._error is not None:
            return StackState.CRASHED
        rs = self._running
        if rs is None:
            return StackState.STARTING
        self._launcher.poll()  # type: ignore[attr-defined]
        state = rs.state  # type: ignore[attr-defined]
        if state == "ready":
            return StackState.READY
        if state == "starting":
            return StackState.STARTING
        if state == "stopped":
            return StackState.STOPPED
        return StackState.CRASHED

    @property
    def base_url(self) -> str:
        return self._running.url if self._running is not None else ""  # type: ignore[attr-defined]

    def log_tail(self, lines: int = 20) -> list[str]:
        if self._running is not None:
            return self._running.log_tail(lines).splitlines()  # type: ignore[attr-defined]
        return (self._error or "").splitlines()[-lines:]

    def resources(self) -> Resources | None:
        if self._running is None or self.state != StackState.READY:
            return self._last
        now = time.monotonic()
        if now - self._sampled_at < _SAMPLE_EVERY:
            return self._last
        from stackrace.stacks.sampler import TreeSampler

        if self._sampler is None:
            self._sampler = TreeSampler(self._running.root_pids)  # type: ignore[attr-defined]
        s = self._sampler.sample()  # type: ignore[attr-defined]
        self._sampled_at = now
        self._last = Resources(rss=s.rss, uss=s.uss, cpu=s.cpu_percent)
        return self._last


class StacksLauncher:
    """The session's Launcher over stackrace.config + stackrace.stacks.launcher."""

    def __init__(self, stacks_file: str | None = None) -> None:
        from stackrace.config import load_stacks
        from stackrace.stacks.launcher import Launcher as _Launcher

        self.defs = load_stacks(stacks_file)
        self.launcher = _Launcher()
        self.handles: list[LaunchedStack] = []
        self.db: object | None = None

    async def start_database(self) -> None:
        """The db workload: start and seed the private MariaDB (scoped to this process, or
        the user's own `stackrace db up` instance) and give every stack its settings."""
        from stackrace.db import ManagedMariaDB, db_env

        if self.db is not None:
            return
        db = ManagedMariaDB(scoped=True)
        settings = await db.ensure_ready_async()
        self.db = db
        self.launcher.extra_env.update(db_env(settings, 1_000_000))

    def catalog(self) -> list[StackChoice]:
        from stackrace.config import resolve
        from stackrace.stacks.availability import check

        out = []
        for name, spec in self.defs.items():
            try:
                avail = check(resolve(name, self.defs))
                ok, reason = avail.available, avail.reason
            except Exception as exc:  # a broken definition is shown, not fatal
                ok, reason = False, str(exc)
            out.append(
                StackChoice(
                    id=name,
                    name=spec.title,
                    family=spec.family,
                    available=ok,
                    reason=reason,
                    default=name in DEFAULT_STACKS,
                    description=spec.description,
                )
            )
        return out

    async def start(self, stack_id: str) -> StackHandle:
        from stackrace.config import resolve

        stack = resolve(stack_id, self.defs)
        spec = self.defs[stack.base]
        handle = LaunchedStack(stack_id, spec.title, spec.family, self.launcher, stack)
        self.handles.append(handle)
        return handle

    async def stop_all(self) -> None:
        for h in self.handles:
            h._task.cancel()
        await self.launcher.stop_all()
        self.launcher.close()
        if self.db is not None:
            self.db.close()  # type: ignore[attr-defined]
            self.db = None


def default_launcher(stacks_file: str | None = None) -> Launcher | None:
    """A Launcher for the stacks in stacks.toml, or None when it cannot be read.

    `stackrace` refuses a broken stacks.toml before it gets here (with the file, stack and
    key), unless only --url targets were asked for: then the race goes on without stacks.
    """
    from stackrace.config import ConfigError

    try:
        return StacksLauncher(stacks_file)
    except ConfigError:
        import logging

        logging.getLogger(__name__).exception("stacks.toml could not be loaded")
        return None
