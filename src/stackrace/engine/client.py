"""`Engine`: the driver's handle on one or more engine processes.

    async with Engine(EngineSettings(), procs=1) as engine:
        await engine.add_target(TargetSpec(id="go", url="http://127.0.0.1:8080/hello"))
        async for snap in engine.snapshots():      # one EngineSnapshot every interval
            ...
        await engine.set_concurrency(200)           # live, all targets (or id=...)

Consumers that poll (the TUI) read `engine.latest`. The engine processes run on uvloop
in their own processes, so a slow consumer never slows the measurement; their reports
are merged here exactly (counts and histograms).

Two topologies:
- shared (`per_target=False`, the default for one URL): `procs` processes, every target
  spread over all of them;
- per target (`per_target=True`, what races use): each target gets `procs` processes of
  its own, started when it is added and pinned to the cores given for it. One target's
  connections then never wait behind another's in an event loop: a server that makes
  the client reconnect after every response is not starved by keep-alive neighbours,
  and each target's engine CPU and lag are its own.

Processes are reached through `EngineLink`s (link.py): local children by default, or any
other link factory (the cluster package's remote engines).

A process can be lost while the load runs — a cluster's load host goes away or silent,
or the process dies. Each tick waits a bounded time for the reports and merges what came
(engine/replies.py: a late process's last gauges stand in for its report, a lost one's
requests in flight are `abandoned`); a process is lost when its link ends, or
(`lost_after`, for remote links) when it has not reported for that long. The loss is
kept (`LostEngine`: which host, when, why, what it cost) in every later snapshot and
in `errors`, its targets' load is spread over the processes left (engine/spread.py).

Long because it is one job, the driver's side of the processes: starting them, placing
targets, commands, and merging their reports into snapshots each tick."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Sequence

import msgspec

from stackrace.base.errors import StackraceError
from stackrace.base.netguard import RemoteTargetError, require_loopback, resolve
from stackrace.engine.aggregate import SATURATED_CPU, IntervalWatcher, TargetAggregate
from stackrace.engine.channel import (
    Add,
    Configure,
    Pause,
    Remove,
    Report,
    ReportMsg,
    Resume,
    SetBudget,
    SetConcurrency,
    SetRate,
    Stop,
)
from stackrace.engine.histogram import LatencyHistogram
from stackrace.engine.link import LinkError, LinkFactory, local_links
from stackrace.engine.model import (
    EngineSettings,
    EngineSnapshot,
    LostEngine,
    TargetSpec,
    rate_problem,
)
from stackrace.engine.replies import (
    EngineProc,
    HostShare,
    abandon,
    by_host,
    final_reports,
    gather,
    losses,
    merge,
)
from stackrace.engine.request import RequestError, build_request, parse_url
from stackrace.engine.spread import fd_problem, split, split_rate

_START_TIMEOUT = 10.0

__all__ = ["Engine", "EngineError", "auto_procs"]


class EngineError(StackraceError, RuntimeError):
    """The engine refused a command or could not start."""


def auto_procs() -> int:
    """Engine processes for --procs auto: one per core we may run on, at most 4."""
    return max(1, min(4, len(os.sched_getaffinity(0))))


class Engine:
    synthetic = False  # measured figures (the demo's engine is the synthetic one)

    def __init__(
        self,
        settings: EngineSettings | None = None,
        procs: int = 1,
        warmup: float = 0.0,
        cpus: Sequence[int] | None = None,
        allow_remote: bool = False,
        per_target: bool = False,
        links: LinkFactory = local_links,
        lost_after: float | None = None,
        start_timeout: float = _START_TIMEOUT,
    ) -> None:
        self.settings = settings or EngineSettings()
        # how long new engine processes may take to say Ready (a remote one: its actor
        # placed, a process started on a busy host, its first line relayed)
        self.start_timeout = start_timeout
        # a process that has not reported for this long is lost (None: only when its link
        # ends; a local child cannot fall silent without dying)
        self.lost_after = lost_after
        self.lost: list[LostEngine] = []
        self._every: list[EngineProc] = []  # every process ever started, for by_host()
        # Load goes to this machine only, unless the user said otherwise explicitly: the
        # check sits here so that no driver (CLI, app, bench) can forget it.
        self.allow_remote = allow_remote
        self.nprocs = max(1, procs)
        self.warmup = warmup
        self.cpus = list(cpus) if cpus else None
        self.per_target = per_target
        self._links = links
        self._procs: list[EngineProc] = []
        self._next_index = 0
        self._targets: dict[str, TargetAggregate] = {}
        self._target_procs: dict[str, list[EngineProc]] = {}
        self._subscribers: list[asyncio.Queue[EngineSnapshot | None]] = []
        self._watchers: list[IntervalWatcher] = []
        self._ticker: asyncio.Task[None] | None = None
        self._started = 0.0
        self._counting_from = 0.0
        self._paused = False
        self._seq = 0
        self._stopped = False
        self._halt = asyncio.Event()  # stop(): the ticker ends after its current tick
        # the ticker's wait ends early: a stop, or a budget spent (a tick now, not at the
        # interval's end: `load -n 1` answered in a millisecond need not wait 250 ms)
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self.latest: EngineSnapshot | None = None
        self.errors: list[str] = []

    # --- lifecycle -------------------------------------------------------------------

    async def __aenter__(self) -> Engine:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        if not self.per_target:
            await self._spawn(self.nprocs, self.cpus)
        self._started = time.monotonic()
        self._counting_from = self._started + self.warmup
        self._ticker = asyncio.create_task(self._tick_loop())

    async def _spawn(self, n: int, cpus: Sequence[int] | None) -> list[EngineProc]:
        """Start n engine processes (spread over `cpus` one core each, when given)."""
        new: list[EngineProc] = []
        try:
            for _ in range(n):
                i = self._next_index
                self._next_index += 1
                pin = [cpus[len(new) % len(cpus)]] if cpus else None
                link = self._links(i, pin)
                await link.open()
                p = EngineProc(i, link)
                p.on_spent = self._spent
                p.reader = asyncio.create_task(p.read(self.errors, EngineError))
                new.append(p)
                self._procs.append(p)
                self._every.append(p)
            async with asyncio.timeout(self.start_timeout):
                readies = await asyncio.gather(*(p.ready for p in new))
        except (TimeoutError, EngineError, LinkError) as exc:
            for p in new:
                await self._close(p)
            if not self.per_target:
                await self.stop()
            why = str(exc) or f"not ready within {self.start_timeout:g}s"
            raise EngineError(f"engine process did not start: {why}") from None
        for p, ready in zip(new, readies, strict=True):
            p.nofile = ready.nofile
            p.send(Configure(settings=self.settings))
            if self._paused:
                p.send(Pause())
        return new

    async def _close(self, p: EngineProc) -> None:
        await p.link.close()
        if p.reader is not None:
            p.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await p.reader
        if p in self._procs:
            self._procs.remove(p)

    async def stop(self) -> EngineSnapshot | None:
        """Stop the load, collect the last counts, end the engine processes."""
        if self._stopped:
            return self.latest
        self._stopped = True
        if self._ticker is not None:
            # Not cancelled: a tick cancelled in its gather loses the replies taken from
            # the processes that answered first (`load --cluster`, replies tens of ms late
            # over Ray, counted ~20 % fewer sent than served). It ends within TICK_WAIT.
            self._halt.set()
            self._wake.set()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        async with self._lock:
            live = [p for p in self._procs if p.ready.done()]
            if live:
                self._publish(*await final_reports(live))
            for p in list(self._procs):
                await self._close(p)
        for q in self._subscribers:
            q.put_nowait(None)
        return self.latest

    # --- commands ----------------------------------------------------------------------

    def _check_fds(self, procs: list[EngineProc], extra: int) -> None:
        problem = fd_problem([p.nofile for p in procs], extra)
        if problem:
            raise EngineError(problem)

    def _load_on(self, procs: list[EngineProc], override: dict[str, int] | None = None) -> int:
        """Connections the given processes carry in all (with some targets overridden)."""
        total = 0
        for tid, t in self._targets.items():
            if self._target_procs.get(tid) == procs:
                total += (override or {}).get(tid, t.concurrency)
        return total

    async def add_target(
        self, spec: TargetSpec, cpus: Sequence[int] | None = None, procs: int | None = None
    ) -> None:
        """Start loading a target. Per-target engines: `procs` processes (default: the
        engine's `procs`) of its own, pinned to `cpus` (default: the engine's cpus)."""
        if spec.id in self._targets:
            raise EngineError(f"target {spec.id!r} exists already")
        if spec.method.upper() == "HEAD":
            raise EngineError("HEAD requests are not supported (responses carry no body)")
        n = (procs or self.nprocs) if self.per_target else max(1, len(self._procs))
        problem = rate_problem(spec.rate, n)
        if problem:
            raise EngineError(problem)
        try:
            build_request(spec.url, spec.method, spec.headers, spec.body)
            host = parse_url(spec.url).host
            require_loopback(host, self.allow_remote)
            if spec.address is None:
                # resolved once, here, where it was checked: the engine never resolves
                # the name again, so the address loaded is the address approved
                spec = msgspec.structs.replace(spec, address=resolve(host)[0])
        except (RequestError, RemoteTargetError) as exc:
            raise EngineError(str(exc)) from None
        async with self._lock:
            if self._stopped:
                # a stack that became ready while the race was being stopped: a process
                # spawned now would outlive the engine (nothing would ever close it)
                raise EngineError("the engine has stopped: no target can be added")
            if self.per_target:
                mine = await self._spawn(procs or self.nprocs, cpus or self.cpus)
            else:
                mine = list(self._procs)
            try:
                self._check_fds(mine, self._load_on(mine) + spec.concurrency)
            except EngineError:
                if self.per_target:
                    for p in mine:
                        await self._close(p)
                raise
            self._targets[spec.id] = TargetAggregate(spec)
            self._target_procs[spec.id] = mine
            budgets = [None] * len(mine) if spec.budget is None else split(spec.budget, len(mine))
            for p, c, r, b in zip(
                mine,
                split(spec.concurrency, len(mine)),
                split_rate(spec.rate, len(mine)),
                budgets,
                strict=True,
            ):
                p.targets.add(spec.id)
                p.spent.discard(spec.id)
                part = msgspec.structs.replace(spec, concurrency=c, rate=r, budget=b)
                p.send(Add(target=part))

    async def remove_target(self, target_id: str) -> None:
        if self._targets.pop(target_id, None) is None:
            raise EngineError(f"no target {target_id!r}")
        procs = self._target_procs.pop(target_id, [])
        for p in procs:
            p.targets.discard(target_id)
            p.send(Remove(id=target_id))
        if self.per_target:
            async with self._lock:
                for p in procs:
                    if not p.targets:
                        p.send(Stop())
                        await self._close(p)

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
        for tid in ids:
            procs = self._target_procs[tid]
            self._check_fds(procs, self._load_on(procs, {i: n for i in ids}))
        for tid in ids:
            self._targets[tid].concurrency = n
            procs = self._target_procs[tid]
            for p, c in zip(procs, split(n, len(procs)), strict=True):
                p.send(SetConcurrency(n=c, id=tid))

    async def set_rate(self, rate: float | None, target_id: str | None = None) -> None:
        """Requests per second per target; None returns to closed loop."""
        if rate is not None and not rate > 0:
            raise EngineError("rate must be > 0")
        for tid in self._ids(target_id):
            problem = rate_problem(rate, len(self._target_procs[tid]))
            if problem:
                raise EngineError(problem)
        for tid in self._ids(target_id):
            self._targets[tid].rate = rate
            procs = self._target_procs[tid]
            for p, r in zip(procs, split_rate(rate, len(procs)), strict=True):
                p.send(SetRate(rate=r, id=tid))

    async def set_budget(self, n: int | None, target_id: str | None = None) -> None:
        """Closed loop: send at most n more requests per target (as ab -n), spread over
        its processes and connections; None removes the limit."""
        if n is not None and n < 0:
            raise EngineError("a request budget must be >= 0")
        for tid in self._ids(target_id):
            procs = self._target_procs[tid]
            parts = [None] * len(procs) if n is None else split(n, len(procs))
            for p, part in zip(procs, parts, strict=True):
                p.spent.discard(tid)
                p.send(SetBudget(n=part, id=tid))

    def _spent(self, proc: EngineProc, target_id: str) -> None:
        """A process said its share of a target's budget is spent: once every process
        carrying the target has, the next tick comes now."""
        procs = self._target_procs.get(target_id, [])
        if procs and all(target_id in p.spent for p in procs):
            self._wake.set()

    async def pause(self) -> None:
        self._paused = True
        for p in self._procs:
            p.send(Pause())

    async def resume(self) -> None:
        self._paused = False
        for p in self._procs:
            p.send(Resume())

    def reset_totals(self, warmup: float = 0.0, target_id: str | None = None) -> None:
        """Start the running figures afresh (for example at each bench level)."""
        for tid in self._ids(target_id):
            self._targets[tid].reset_total()
        if target_id is None:
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

    def by_host(self, target_id: str) -> dict[str, HostShare]:
        """What each host's engine processes reported for a target, since the start
        (lost ones included): the share of the merged figures each host sent."""
        return by_host(self._every, target_id)

    def engine_pids(self, target_id: str | None = None) -> list[int]:
        """Local pids of the engine processes (of one target), for pinning and sampling."""
        procs = self._procs if target_id is None else self._target_procs.get(target_id, [])
        return [pid for p in procs if (pid := getattr(p.link, "pid", None)) is not None]

    # --- stats -------------------------------------------------------------------------

    def watch_intervals(self, watcher: IntervalWatcher) -> None:
        """Call `watcher` as each interval is published, in step (none missed or seen
        twice): race/core/series.py. The histograms change after the call: merge them."""
        self._watchers.append(watcher)

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
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, next_at - time.monotonic())):
                    await self._wake.wait()
            if self._halt.is_set():
                return
            if self._wake.is_set():  # a budget spent: this interval ends now, a short one
                self._wake.clear()
                next_at = time.monotonic()
            next_at += interval
            async with self._lock:
                live = [p for p in self._procs if p.ready.done()]
                if not live and not self.per_target:
                    gone = "was lost" if self.lost else "has exited"
                    self.errors.append(f"every engine process {gone}")
                    for q in self._subscribers:
                        q.put_nowait(None)
                    return
                for p in live:
                    if p.alive:
                        p.send(Report())
                got = await gather(live, final=False)
                self._publish(got, losses(live, got, self.lost_after))

    def _publish(
        self,
        got: dict[EngineProc, list[ReportMsg]],
        lost: Sequence[tuple[EngineProc, str]] = (),
    ) -> None:
        now = time.monotonic()
        gone = {p for p, _ in lost}
        real = {p: [r for r in reports if r.seq >= 0] for p, reports in got.items()}
        spans = [
            (sum(r.seconds for r in rs), sum(r.cpu for r in rs))
            for p, rs in real.items()
            if rs and p not in gone
        ]
        seconds = max((s for s, _ in spans), default=0.0)
        # An interval counts once it started after the warm-up; with no warm-up every
        # interval counts (the first one starts before any target could be loaded).
        started = now - seconds
        counting = not self._paused and (
            self._counting_from <= self._started or started >= self._counting_from - 1e-3
        )
        merge(self._targets, real, gone)
        for p, why in lost:
            self._lose(p, why, now)
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
            saturated=max(cpus, default=0.0) >= SATURATED_CPU,
            targets=[t.end_interval(counting) for t in self._targets.values()],
            lost=list(self.lost),
        )
        self.latest = snap
        for watcher in self._watchers:  # each target's histogram of this interval alone
            watcher(snap, {tid: t.interval.hist for tid, t in self._targets.items()})
        for q in self._subscribers:
            q.put_nowait(snap)

    def _lose(self, p: EngineProc, why: str, now: float) -> None:
        """Account for a lost process (in the interval being published), let it go, and
        spread its targets' load over the processes left."""
        loss = abandon(p, self._targets, why, now - self._started)
        self.lost.append(loss)
        if p in self._procs:
            self._procs.remove(p)
        p.let_go()
        left = len(self._procs)
        self.errors.append(f"{loss.describe()}; the load goes on with {left} engine process(es)")
        for tid in sorted(p.targets):
            procs = self._target_procs.get(tid)
            if procs is None:
                continue
            if p in procs:
                procs.remove(p)
            agg = self._targets[tid]
            if not procs:
                self.errors.append(f"{tid}: every engine process loading it was lost")
                continue
            for q, c, r in zip(
                procs,
                split(agg.concurrency, len(procs)),
                split_rate(agg.rate, len(procs)),
                strict=True,
            ):
                q.send(SetConcurrency(n=c, id=tid))
                if agg.rate is not None:
                    q.send(SetRate(rate=r, id=tid))
