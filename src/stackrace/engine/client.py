"""`Engine`: the driver's handle on one or more engine processes.

    async with Engine(EngineSettings(), procs=1) as engine:
        await engine.add_target(TargetSpec(id="go", url="http://127.0.0.1:8080/hello"))
        async for snap in engine.snapshots():      # one EngineSnapshot every interval
            ...
        await engine.set_concurrency(200)           # live, all targets (or id=...)

Consumers that poll (the TUI) read `engine.latest` instead of iterating. The engine
processes run on uvloop in their own processes, so a slow consumer never slows the
measurement; their reports are merged here exactly (counts and histograms).

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
or the process dies. Each tick waits a bounded time for the reports, so one silent
process never holds the others' figures back: a late process's last gauges stand in for
its report (its requests are still in flight), and its reports are merged when they
come. A process is lost when its link ends, or (`lost_after`, for remote links) when it
has not reported for that long. Then what it had in flight at its last report is counted
`abandoned`, the loss is kept (`LostEngine`: which host, when, why, what it cost) in every
later snapshot and in `errors`, its targets' connections (and rate) are spread over the
processes left, and the load goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import msgspec

from stackrace.base.errors import StackraceError
from stackrace.base.netguard import RemoteTargetError, require_loopback, resolve
from stackrace.engine.aggregate import TargetAggregate
from stackrace.engine.channel import (
    Add,
    Command,
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
    TargetReport,
)
from stackrace.engine.histogram import LatencyHistogram
from stackrace.engine.link import EngineLink, LinkError, LinkFactory, local_links
from stackrace.engine.model import (
    EngineSettings,
    EngineSnapshot,
    LostEngine,
    TargetSpec,
    rate_problem,
)
from stackrace.engine.request import RequestError, build_request, parse_url
from stackrace.engine.target import split

_SATURATED = 90.0  # percent of one core: a single-threaded engine near its ceiling
_START_TIMEOUT = 10.0
# How long a tick waits for the processes' reports: far above a healthy reply (a pipe or
# a Ray call, milliseconds), so only a late process is left out of a tick.
_TICK_WAIT = 1.0
_FINAL_WAIT = 5.0  # how long stop() waits for each process's final report
_FD_RESERVE = 64  # file descriptors an engine process needs besides its connections

__all__ = ["Engine", "EngineError", "auto_procs", "split"]


@dataclass
class HostShare:
    """One host's share of a target's figures (Engine.by_host): counts as its engine
    processes reported them; `waiting` as of their latest report (0 once lost)."""

    sent: int = 0
    requests: int = 0
    ok: int = 0
    failed: int = 0
    waiting: int = 0


class EngineError(StackraceError, RuntimeError):
    """The engine refused a command or could not start."""


def auto_procs() -> int:
    """Engine processes for --procs auto: one per core we may run on, at most 4."""
    return max(1, min(4, len(os.sched_getaffinity(0))))


class _Proc:
    """One engine process: its link, its replies, the targets it carries."""

    def __init__(self, index: int, link: EngineLink) -> None:
        self.index = index
        self.link = link
        self.nofile = 0
        self.ready: asyncio.Future[Ready] = asyncio.get_running_loop().create_future()
        self.reports: asyncio.Queue[ReportMsg] = asyncio.Queue()
        self.errors: list[str] = []
        self.reader: asyncio.Task[None] | None = None
        self.targets: set[str] = set()
        self.exited = False
        self.last_heard = time.monotonic()  # when its link last delivered a message
        self.last_error = ""  # what its link said when it failed
        self.gauges: dict[str, TargetReport] = {}  # its latest report of each target
        # per target: [sent, answered, ok, failed] it reported (its host's share)
        self.counts: dict[str, list[int]] = {}
        self.lost = False

    def send(self, cmd: Command) -> None:
        self.link.send(cmd)

    @property
    def alive(self) -> bool:
        return not self.exited and self.link.alive


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
        self._every: list[_Proc] = []  # every process ever started, for by_host()
        # Load goes to this machine only, unless the user said otherwise explicitly: the
        # check sits here so that no driver (CLI, app, bench) can forget it.
        self.allow_remote = allow_remote
        self.nprocs = max(1, procs)
        self.warmup = warmup
        self.cpus = list(cpus) if cpus else None
        self.per_target = per_target
        self._links = links
        self._procs: list[_Proc] = []
        self._next_index = 0
        self._targets: dict[str, TargetAggregate] = {}
        self._target_procs: dict[str, list[_Proc]] = {}
        self._subscribers: list[asyncio.Queue[EngineSnapshot | None]] = []
        self._ticker: asyncio.Task[None] | None = None
        self._started = 0.0
        self._counting_from = 0.0
        self._paused = False
        self._seq = 0
        self._stopped = False
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

    async def _spawn(self, n: int, cpus: Sequence[int] | None) -> list[_Proc]:
        """Start n engine processes (spread over `cpus` one core each, when given)."""
        new: list[_Proc] = []
        try:
            for _ in range(n):
                i = self._next_index
                self._next_index += 1
                pin = [cpus[len(new) % len(cpus)]] if cpus else None
                link = self._links(i, pin)
                await link.open()
                p = _Proc(i, link)
                p.reader = asyncio.create_task(self._read(p))
                new.append(p)
                self._procs.append(p)
                self._every.append(p)
            readies = await asyncio.wait_for(
                asyncio.gather(*(p.ready for p in new)), self.start_timeout
            )
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

    async def _read(self, p: _Proc) -> None:
        async for msg in p.link.messages():
            p.last_heard = time.monotonic()
            if isinstance(msg, str):
                p.last_error = msg
                self.errors.append(f"engine {p.index}: {msg}")
            elif isinstance(msg, ReportMsg):
                p.reports.put_nowait(msg)
            elif isinstance(msg, Ready):
                if not p.ready.done():
                    p.ready.set_result(msg)
            elif isinstance(msg, ErrorMsg):
                p.errors.append(msg.message)
                self.errors.append(msg.message)
        p.exited = True
        if not p.ready.done():
            p.ready.set_exception(EngineError(f"engine process {p.index} exited at start"))
        p.reports.put_nowait(ReportMsg(seq=-1, seconds=0.0, cpu=0.0, targets=[], final=True))

    async def _close(self, p: _Proc) -> None:
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
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        async with self._lock:
            live = [p for p in self._procs if p.ready.done()]
            for p in live:
                if p.alive:
                    p.send(Stop())
            if live:
                got = await self._gather(live, final=True)
                lost = [
                    (p, self._why_lost(p, f"no final report within {_FINAL_WAIT:g}s"))
                    for p in live
                    if not any(r.final and r.seq >= 0 for r in got[p])
                ]
                self._publish(got, lost)
            for p in list(self._procs):
                await self._close(p)
        for q in self._subscribers:
            q.put_nowait(None)
        return self.latest

    # --- commands ----------------------------------------------------------------------

    def _check_fds(self, procs: list[_Proc], extra: int) -> None:
        for p, n in zip(procs, split(extra, len(procs)), strict=True):
            if p.nofile and n + _FD_RESERVE > p.nofile:
                raise EngineError(
                    f"{extra} connections need {n + _FD_RESERVE} open files per engine process "
                    f"but the limit is {p.nofile} (raise it with `ulimit -n`, or use more "
                    "--procs)"
                )

    def _load_on(self, procs: list[_Proc], override: dict[str, int] | None = None) -> int:
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
                self._split_rate(spec.rate, len(mine)),
                budgets,
                strict=True,
            ):
                p.targets.add(spec.id)
                part = msgspec.structs.replace(spec, concurrency=c, rate=r, budget=b)
                p.send(Add(target=part))

    @staticmethod
    def _split_rate(rate: float | None, n: int) -> list[float | None]:
        return [None if rate is None else rate / n] * n

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
            for p, r in zip(procs, self._split_rate(rate, len(procs)), strict=True):
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
                p.send(SetBudget(n=part, id=tid))

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
        out: dict[str, HostShare] = {}
        for p in self._every:
            c = p.counts.get(target_id)
            if c is None:
                continue
            host = getattr(p.link, "host", "local")
            share = out.setdefault(host, HostShare())
            share.sent += c[0]
            share.requests += c[1]
            share.ok += c[2]
            share.failed += c[3]
            last = p.gauges.get(target_id)
            if last is not None and not p.lost:
                share.waiting += last.waiting
        return out

    def engine_pids(self, target_id: str | None = None) -> list[int]:
        """Local pids of the engine processes (of one target), for pinning and sampling."""
        procs = self._procs if target_id is None else self._target_procs.get(target_id, [])
        return [pid for p in procs if (pid := getattr(p.link, "pid", None)) is not None]

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
                got = await self._gather(live, final=False)
                self._publish(got, self._losses(live, got))

    def _why_lost(self, p: _Proc, silent: str) -> str:
        if p.alive:
            return silent
        return p.last_error or "the process exited"

    def _losses(
        self, live: list[_Proc], got: dict[_Proc, list[ReportMsg]]
    ) -> list[tuple[_Proc, str]]:
        """The processes lost by now: their link ended, or they have been silent too long."""
        now = time.monotonic()
        out = []
        for p in live:
            if p.exited:
                # whatever came before the end is merged: the reader has queued every
                # report the process sent (`alive` turns false at its exit, perhaps
                # before its last lines are read: not yet a loss)
                while not p.reports.empty():
                    got[p].append(p.reports.get_nowait())
                out.append((p, self._why_lost(p, "")))
            elif self.lost_after is not None and now - p.last_heard > self.lost_after:
                out.append((p, f"no report for {now - p.last_heard:.1f}s"))
        return out

    async def _gather(self, procs: list[_Proc], final: bool) -> dict[_Proc, list[ReportMsg]]:
        """Each process's replies, waiting a bounded time: one that is late is left out
        (the caller carries its gauges, or finds it lost)."""
        deadline = time.monotonic() + (_FINAL_WAIT if final else _TICK_WAIT)
        got = await asyncio.gather(*(self._take(p, deadline, final) for p in procs))
        return dict(zip(procs, got, strict=True))

    async def _take(self, p: _Proc, deadline: float, final: bool) -> list[ReportMsg]:
        """A tick: one reply, and any earlier ones still queued (a late process's). A
        stop: everything up to the process's final report."""
        out: list[ReportMsg] = []
        while True:
            if out and not final:
                try:
                    out.append(p.reports.get_nowait())
                    continue
                except asyncio.QueueEmpty:
                    return out
            # `exited`, not `alive`: a process that has exited may still have lines in
            # its pipe (its final report among them) that the reader has not taken yet;
            # once the reader has taken them all, `exited` is set (and a closing report
            # queued, so the wait below never outlasts it)
            if p.exited and p.reports.empty():
                return out
            left = deadline - time.monotonic()
            if left <= 0:
                return out
            try:
                msg = await asyncio.wait_for(p.reports.get(), left)
            except TimeoutError:
                return out
            out.append(msg)
            if final and msg.final:
                return out

    def _publish(
        self,
        got: dict[_Proc, list[ReportMsg]],
        lost: Sequence[tuple[_Proc, str]] = (),
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
        for t in self._targets.values():
            t.begin_interval()
        for p, rs in real.items():
            if not rs:
                continue
            secs = sum(r.seconds for r in rs)
            cpu = sum(r.cpu for r in rs)
            wait = sum(r.wait for r in rs)
            runs = sum(r.runs for r in rs)
            for k, r in enumerate(rs):
                # a lost process's reports bring their counts, never gauges: what it had
                # in flight is abandoned below
                latest = k == len(rs) - 1 and p not in gone
                for tr in r.targets:
                    p.gauges[tr.id] = tr
                    c = p.counts.setdefault(tr.id, [0, 0, 0, 0])
                    c[0] += tr.sent
                    c[1] += tr.requests
                    c[2] += tr.ok
                    c[3] += sum(tr.failures.values())
                    agg = self._targets.get(tr.id)
                    if agg is not None:
                        agg.add_report(
                            tr,
                            secs if latest else 0.0,
                            cpu if latest else 0.0,
                            latest,
                            wait if latest else 0.0,
                            runs if latest else 0,
                        )
        for p, rs in real.items():
            if not rs and p not in gone:
                for tid in p.targets:  # late: its requests are still in flight
                    agg, last = self._targets.get(tid), p.gauges.get(tid)
                    if agg is not None and last is not None:
                        agg.carry(last)
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
            saturated=max(cpus, default=0.0) >= _SATURATED,
            targets=[t.end_interval(counting) for t in self._targets.values()],
            lost=list(self.lost),
        )
        self.latest = snap
        for q in self._subscribers:
            q.put_nowait(snap)

    def _lose(self, p: _Proc, why: str, now: float) -> None:
        """Account for a lost process (in the interval being published), let it go, and
        spread its targets' load over the processes left."""
        abandoned: dict[str, int] = {}
        for tid in sorted(p.targets):
            agg, last = self._targets.get(tid), p.gauges.get(tid)
            n = last.waiting if last is not None else 0
            if agg is not None:
                agg.abandon(n)
            abandoned[tid] = n
            p.counts.setdefault(tid, [0, 0, 0, 0])[3] += n
        loss = LostEngine(
            host=getattr(p.link, "host", "local"),
            where=p.link.description,
            at=now - self._started,
            wall=time.time(),
            why=why,
            abandoned=abandoned,
        )
        self.lost.append(loss)
        p.lost = True
        if p in self._procs:
            self._procs.remove(p)
        p.exited = True
        with contextlib.suppress(Exception):
            p.link.discard()
        if p.reader is not None:
            p.reader.cancel()
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
                self._split_rate(agg.rate, len(procs)),
                strict=True,
            ):
                q.send(SetConcurrency(n=c, id=tid))
                if agg.rate is not None:
                    q.send(SetRate(rate=r, id=tid))
