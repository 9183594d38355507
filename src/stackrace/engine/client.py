"""`Engine`: the driver's handle on one or more engine processes.

    async with Engine(EngineSettings(), procs=1) as engine:
        await engine.add_target(TargetSpec(id="go", url="http://127.0.0.1:8080/hello"))
        async for snap in engine.snapshots():      # one EngineSnapshot every interval
            ...
        await engine.set_concurrency(200)           # live, all targets (or id=...)

Consumers that poll (the TUI) read `engine.latest` instead of iterating. The engine
processes run on uvloop in their own processes, so a slow consumer never slows the
measurement; their reports are merged here exactly (counts and histograms).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator, Sequence

import msgspec

from stackrace.engine.aggregate import TargetAggregate
from stackrace.engine.channel import (
    Add,
    Configure,
    ErrorMsg,
    Pause,
    Ready,
    Remove,
    Report,
    ReportMsg,
    Resume,
    SetBudget,
    SetConcurrency,
    SetRate,
    Stop,
    command_encoder,
    message_decoder,
)
from stackrace.engine.histogram import LatencyHistogram
from stackrace.engine.model import EngineSettings, EngineSnapshot, TargetSpec
from stackrace.engine.request import RequestError, build_request, parse_url
from stackrace.netguard import RemoteTargetError, require_loopback

_SATURATED = 90.0  # percent of one core: a single-threaded engine near its ceiling
_START_TIMEOUT = 10.0
_FD_RESERVE = 64  # file descriptors an engine process needs besides its connections


class EngineError(RuntimeError):
    """The engine refused a command or could not start."""


def split(n: int, parts: int) -> list[int]:
    """Spread n as evenly as possible over parts (the first ones get the remainder)."""
    base, extra = divmod(n, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def auto_procs() -> int:
    """Engine processes for --procs auto: one per core we may run on, at most 4."""
    return max(1, min(4, len(os.sched_getaffinity(0))))


class _Proc:
    def __init__(self, index: int, proc: asyncio.subprocess.Process) -> None:
        self.index = index
        self.proc = proc
        self.nofile = 0
        self.ready: asyncio.Future[Ready] = asyncio.get_running_loop().create_future()
        self.reports: asyncio.Queue[ReportMsg] = asyncio.Queue()
        self.errors: list[str] = []
        self.reader: asyncio.Task[None] | None = None

    def send(self, cmd: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command_encoder.encode(cmd) + b"\n")


class Engine:
    def __init__(
        self,
        settings: EngineSettings | None = None,
        procs: int = 1,
        warmup: float = 0.0,
        cpus: Sequence[int] | None = None,
        allow_remote: bool = False,
    ) -> None:
        self.settings = settings or EngineSettings()
        # Load goes to this machine only, unless the user said otherwise explicitly: the
        # check sits here so that no driver (CLI, app, bench) can forget it.
        self.allow_remote = allow_remote
        self.nprocs = max(1, procs)
        self.warmup = warmup
        self.cpus = list(cpus) if cpus else None
        self._procs: list[_Proc] = []
        self._targets: dict[str, TargetAggregate] = {}
        self._subscribers: list[asyncio.Queue[EngineSnapshot | None]] = []
        self._ticker: asyncio.Task[None] | None = None
        self._started = 0.0
        self._counting_from = 0.0
        self._paused = False
        self._seq = 0
        self._stopped = False
        self.latest: EngineSnapshot | None = None
        self.errors: list[str] = []

    # --- lifecycle -------------------------------------------------------------------

    async def __aenter__(self) -> Engine:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        for i in range(self.nprocs):
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "stackrace.engine.worker",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=None,
                start_new_session=True,  # Ctrl-C in the terminal reaches only the driver
            )
            if self.cpus:
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(proc.pid, {self.cpus[i % len(self.cpus)]})
            p = _Proc(i, proc)
            p.reader = asyncio.create_task(self._read(p))
            self._procs.append(p)
        try:
            readies = await asyncio.wait_for(
                asyncio.gather(*(p.ready for p in self._procs)), _START_TIMEOUT
            )
        except (TimeoutError, EngineError) as exc:
            await self.stop()
            raise EngineError(f"engine process did not start: {exc}") from None
        for p, ready in zip(self._procs, readies, strict=True):
            p.nofile = ready.nofile
            p.send(Configure(settings=self.settings))
        self._started = time.monotonic()
        self._counting_from = self._started + self.warmup
        self._ticker = asyncio.create_task(self._tick_loop())

    async def _read(self, p: _Proc) -> None:
        assert p.proc.stdout is not None
        stdout = p.proc.stdout
        while True:
            try:
                line = await stdout.readline()
            except (ValueError, asyncio.LimitOverrunError):
                # a line over the stream limit: read it whole
                line = await stdout.readuntil(b"\n")
            if not line:
                break
            try:
                msg = message_decoder.decode(line)
            except msgspec.DecodeError as exc:
                self.errors.append(f"engine {p.index}: unreadable message: {exc}")
                continue
            if isinstance(msg, ReportMsg):
                p.reports.put_nowait(msg)
            elif isinstance(msg, Ready):
                if not p.ready.done():
                    p.ready.set_result(msg)
            elif isinstance(msg, ErrorMsg):
                p.errors.append(msg.message)
                self.errors.append(msg.message)
        if not p.ready.done():
            p.ready.set_exception(EngineError(f"engine process {p.index} exited at start"))
        p.reports.put_nowait(ReportMsg(seq=-1, seconds=0.0, cpu=0.0, targets=[], final=True))

    async def stop(self) -> EngineSnapshot | None:
        """Stop the load, collect the last counts, end the engine processes."""
        if self._stopped:
            return self.latest
        self._stopped = True
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        live = [p for p in self._procs if p.proc.returncode is None and p.ready.done()]
        for p in live:
            with contextlib.suppress(ConnectionError, RuntimeError):
                p.send(Stop())
        if live:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._collect(live, final=True), 5.0)
        for p in self._procs:
            if p.proc.stdin is not None:
                p.proc.stdin.close()
        for p in self._procs:
            try:
                await asyncio.wait_for(p.proc.wait(), 2.0)
            except TimeoutError:
                p.proc.kill()
                await p.proc.wait()
            if p.reader is not None:
                p.reader.cancel()
        for q in self._subscribers:
            q.put_nowait(None)
        return self.latest

    # --- commands ----------------------------------------------------------------------

    def _check_fds(self, extra: int) -> None:
        for p, n in zip(self._procs, split(extra, len(self._procs)), strict=True):
            if n + _FD_RESERVE > p.nofile:
                raise EngineError(
                    f"{extra} connections need {n + _FD_RESERVE} open files per engine process "
                    f"but the limit is {p.nofile} (raise it with `ulimit -n`, or use more "
                    "--procs)"
                )

    def _total_connections(self, override: dict[str, int] | None = None) -> int:
        total = 0
        for tid, t in self._targets.items():
            total += (override or {}).get(tid, t.concurrency)
        return total

    async def add_target(self, spec: TargetSpec) -> None:
        if spec.id in self._targets:
            raise EngineError(f"target {spec.id!r} exists already")
        if spec.method.upper() == "HEAD":
            raise EngineError("HEAD requests are not supported (responses carry no body)")
        try:
            build_request(spec.url, spec.method, spec.headers, spec.body)
            require_loopback(parse_url(spec.url).host, self.allow_remote)
        except (RequestError, RemoteTargetError) as exc:
            raise EngineError(str(exc)) from None
        self._check_fds(self._total_connections() + spec.concurrency)
        self._targets[spec.id] = TargetAggregate(spec)
        n = len(self._procs)
        for p, c, r in zip(
            self._procs, split(spec.concurrency, n), self._split_rate(spec.rate), strict=True
        ):
            p.send(Add(target=msgspec.structs.replace(spec, concurrency=c, rate=r)))

    def _split_rate(self, rate: float | None) -> list[float | None]:
        n = len(self._procs)
        return [None if rate is None else rate / n] * n

    async def remove_target(self, target_id: str) -> None:
        if self._targets.pop(target_id, None) is None:
            raise EngineError(f"no target {target_id!r}")
        for p in self._procs:
            p.send(Remove(id=target_id))

    def _ids(self, target_id: str | None) -> list[str]:
        if target_id is None:
            return list(self._targets)
        if target_id not in self._targets:
            raise EngineError(f"no target {target_id!r}")
        return [target_id]

    async def set_concurrency(self, n: int, target_id: str | None = None) -> None:
        """Connections per target, live: new ones open, surplus ones retire within 250 ms."""
        if n < 0:
            raise EngineError("concurrency must be >= 0")
        ids = self._ids(target_id)
        self._check_fds(self._total_connections({i: n for i in ids}))
        for tid in ids:
            self._targets[tid].concurrency = n
            for p, c in zip(self._procs, split(n, len(self._procs)), strict=True):
                p.send(SetConcurrency(n=c, id=tid))

    async def set_rate(self, rate: float | None, target_id: str | None = None) -> None:
        """Requests per second per target; None returns to closed loop."""
        if rate is not None and rate <= 0:
            raise EngineError("rate must be > 0")
        for tid in self._ids(target_id):
            self._targets[tid].rate = rate
            for p, r in zip(self._procs, self._split_rate(rate), strict=True):
                p.send(SetRate(rate=r, id=tid))

    async def set_budget(self, n: int | None, target_id: str | None = None) -> None:
        """Closed loop: send at most n more requests per target (as ab -n), spread over
        the engine processes; None removes the limit."""
        if n is not None and n < 0:
            raise EngineError("a request budget must be >= 0")
        for tid in self._ids(target_id):
            parts = [None] * len(self._procs) if n is None else split(n, len(self._procs))
            for p, part in zip(self._procs, parts, strict=True):
                p.send(SetBudget(n=part, id=tid))

    async def pause(self) -> None:
        self._paused = True
        for p in self._procs:
            p.send(Pause())

    async def resume(self) -> None:
        self._paused = False
        for p in self._procs:
            p.send(Resume())

    def reset_totals(self, warmup: float = 0.0) -> None:
        """Start the running figures afresh (for example at each bench level)."""
        for t in self._targets.values():
            t.total.reset()
        self._counting_from = time.monotonic() + warmup if warmup > 0 else self._started

    def total_histogram(self, target_id: str, uncorrected: bool = False) -> LatencyHistogram:
        t = self._targets[target_id]
        return (t.total.hist_unc if uncorrected else t.total.hist).to_dense()

    def total_percentiles(
        self, target_id: str, points: Sequence[float], uncorrected: bool = False
    ) -> list[int]:
        """Latency (µs) at each percentile of the running totals, without building the
        dense 23,552-slot array that total_histogram() returns (cheap enough for a chart
        redrawn every second). Zeros when nothing was recorded."""
        t = self._targets[target_id]
        return (t.total.hist_unc if uncorrected else t.total.hist).percentiles(points)

    @property
    def target_ids(self) -> list[str]:
        return list(self._targets)

    # --- stats -------------------------------------------------------------------------

    async def snapshots(self) -> AsyncIterator[EngineSnapshot]:
        """Every snapshot from now until the engine stops."""
        q: asyncio.Queue[EngineSnapshot | None] = asyncio.Queue()
        self._subscribers.append(q)
        try:
            while True:
                snap = await q.get()
                if snap is None:
                    return
                yield snap
        finally:
            self._subscribers.remove(q)

    async def _tick_loop(self) -> None:
        interval = self.settings.interval
        next_at = time.monotonic() + interval
        while True:
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            next_at += interval
            live = [p for p in self._procs if p.proc.returncode is None]
            if not live:
                self.errors.append("every engine process has exited")
                for q in self._subscribers:
                    q.put_nowait(None)
                return
            for p in live:
                p.send(Report())
            await self._collect(live, final=False)

    async def _collect(self, procs: list[_Proc], final: bool) -> None:
        """Wait for each process's reply; when stopping, merge everything up to its last one."""
        per_proc: list[list[ReportMsg]] = []
        for p in procs:
            got: list[ReportMsg] = []
            while True:
                msg = await p.reports.get()
                got.append(msg)
                if not final or msg.final:
                    break
            per_proc.append(got)
        self._publish(per_proc)

    def _publish(self, per_proc: list[list[ReportMsg]]) -> None:
        now = time.monotonic()
        real = [[r for r in got if r.seq >= 0] for got in per_proc]
        spans = [(sum(r.seconds for r in got), sum(r.cpu for r in got)) for got in real if got]
        seconds = max((s for s, _ in spans), default=0.0)
        # An interval counts once it started after the warm-up; with no warm-up every
        # interval counts (the first one starts before any target could be loaded).
        started = now - seconds
        counting = not self._paused and (
            self._counting_from <= self._started or started >= self._counting_from - 1e-3
        )
        for t in self._targets.values():
            t.begin_interval(seconds)
        for got in real:
            for r in got:
                for tr in r.targets:
                    agg = self._targets.get(tr.id)
                    if agg is not None:
                        agg.add_report(tr)
        cpus = [100.0 * c / s for s, c in spans if s > 0]
        self._seq += 1
        snap = EngineSnapshot(
            seq=self._seq,
            elapsed=now - self._started,
            warming=now < self._counting_from,
            paused=self._paused,
            procs=len(self._procs),
            engine_cpu=sum(cpus),
            engine_cpu_max=max(cpus, default=0.0),
            saturated=max(cpus, default=0.0) >= _SATURATED,
            targets=[t.end_interval(counting) for t in self._targets.values()],
        )
        self.latest = snap
        for q in self._subscribers:
            q.put_nowait(snap)
