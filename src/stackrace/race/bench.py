"""`stackrace bench` without the printing: the race core driven by a plan.

    run = await run_bench(BenchPlan(stacks, settings), progress=print)

The stacks are raced exactly as the app races them (race/core.py: per-stack engine
processes, the same placement), level by level:

- closed loop: set the concurrency, warm up (time, then optionally a number of answered
  requests), restart the totals on an interval boundary, measure `duration`;
- `--requests N` (as ab -n): warm up, drain until nothing is in flight, then send
  exactly N spread over the connections and wait until every one was answered or failed
  (each is bounded by the request timeout, never by `duration`); req/s is timed from the
  first send to the last answer;
- `--rate R`: one level at R req/s per stack.

Servers the user started (`--url`, race/urls.py) are members like the stacks: placed
(they count when bench decides whether every member gets cores of its own), grouped and
rotated with them, loaded and drained the same way; but never started, pinned or
stopped, checked only for a connection before their first level, and sampled only when
their pid was given. A member that left a rotation is never loaded again.

Each level keeps the engine's complete accounting (answered, failed by kind, waiting),
the Little's-law check, the engine's share of the latency, the stack's CPU (and CPU
time per request), memory before and after, and whether the database was down. A stack
that crashes ends its levels at once. Results are collected as they are measured, so
an interrupted run keeps every finished level (`BenchRecorder`).
"""

from __future__ import annotations

import asyncio
import os
import platform
import socket
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import psutil

from stackrace import __version__
from stackrace.config import Stack, placeholders, render
from stackrace.db.watch import DbWatch
from stackrace.engine.aggregate import add_kinds
from stackrace.engine.client import Engine
from stackrace.engine.histogram import LatencyHistogram
from stackrace.engine.model import EngineSettings, WindowStats
from stackrace.race import accounting
from stackrace.race.capacity_run import CapacityPlan, search_capacity
from stackrace.race.core import (
    LoadEngine,
    Member,
    RaceCore,
    RaceParts,
    StackStarter,
    StackState,
)
from stackrace.race.placement import Placement, choose_isolation, place
from stackrace.race.stacks import StacksSource
from stackrace.race.urls import UrlHandle, UrlTarget
from stackrace.race_settings import RaceSettings
from stackrace.ramp import find_breaking_point, step_result
from stackrace.report.schema import (
    SCHEMA_VERSION,
    BenchRun,
    Level,
    LittleLaw,
    Machine,
    Memory,
    PathResult,
    Settings,
    StackResult,
)
from stackrace.stacks.sampler import ResourceSample

Progress = Callable[[str], None]


@dataclass
class BenchPlan:
    stacks: list[Stack]
    settings: RaceSettings
    preset: str | None = None
    db_env: dict[str, str] = field(default_factory=dict)
    # set when the workload uses a database: a level measured while it was down is marked
    # (and not judged), and no stack is started against a dead database
    database: DbWatch | None = None
    stacks_file: str | None = None
    # called with the race core as soon as it is made, before any stack starts: a front
    # end that watches the race live (`--metrics`: stackrace.metrics) follows its engine
    on_core: Callable[[RaceCore], None] | None = None
    # servers the user started (--url): raced after the stacks, in the same groups, never
    # started, pinned or stopped by us
    urls: list[UrlTarget] = field(default_factory=list)
    allow_remote: bool = False  # --url off loopback (checked again by the engine)
    # `bench --capacity`: instead of the levels, search each stack's capacity under the
    # SLO (race/capacity_run.py); the result goes to StackResult.capacity
    capacity: CapacityPlan | None = None

    @property
    def members(self) -> int:
        """Stacks and --url servers: what is placed, grouped and raced."""
        return len(self.stacks) + len(self.urls)


def _kind_labels(s: RaceSettings) -> list[str]:
    kinds = s.request_kinds() if s.own_requests else None
    return [f"{k.label} ×{k.weight}" for k in kinds or []]


def machine_info() -> Machine:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    os_name = platform.platform()
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return Machine(
        hostname=socket.gethostname(),
        cpu_model=model,
        cores=len(os.sched_getaffinity(0)),
        memory_bytes=psutil.virtual_memory().total,
        kernel=platform.release(),
        os=os_name,
        python=platform.python_version(),
        stackrace=__version__,
    )


def server_version(stack: Stack) -> str:
    if not stack.spec.version:
        return ""
    values = placeholders(stack, 0, Path("/tmp"))
    try:
        out = subprocess.run(
            [render(a, values) for a in stack.spec.version],
            capture_output=True,
            text=True,
            timeout=10,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return ""
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0][:80] if text else ""


def plan_placement(
    settings: RaceSettings, n_stacks: int, parts: RaceParts | None = None
) -> tuple[Placement, str]:
    """Where the stacks and engines run: here, or (with `parts`) on other hosts, where the
    stacks' host gives every core to the stacks."""
    here = parts is None
    cores = sorted(os.sched_getaffinity(0)) if parts is None else list(parts.cores)
    # with the engines elsewhere they need no core of the stacks' host
    isolation, why = choose_isolation(
        settings.isolation, n_stacks, settings.cpus, len(cores) + (0 if here else 1)
    )
    return place(isolation, n_stacks, settings.cpus, cores, engine_here=here), why


class BenchRecorder:
    """The run being measured: complete up to the last finished level at any moment."""

    def __init__(self, plan: BenchPlan, placement: Placement, why: str) -> None:
        s = plan.settings
        self.run = BenchRun(
            schema=SCHEMA_VERSION,
            started=datetime.now(UTC).isoformat(timespec="seconds"),
            machine=machine_info(),
            settings=Settings(
                **msgspec.structs.asdict(s),
                path=s.path,
                kinds=_kind_labels(s),
                isolation_reason=why,
                placement=placement.note,
                preset=plan.preset,
            ),
            stacks=[],
        )
        self.run.settings.isolation = placement.isolation
        self.by_name: dict[str, StackResult] = {}

    def stack(self, stack: Stack, cpus: list[int] | None) -> StackResult:
        result = StackResult(
            name=stack.name,
            title=stack.title,
            family=stack.spec.family,
            version=server_version(stack),
            levels=[],
            cpus=cpus,
        )
        self.by_name[stack.name] = result
        self.run.stacks.append(result)
        return result

    def url(self, target: UrlTarget) -> StackResult:
        """A server the user started: its name, the URL raced, whether it is sampled."""
        result = StackResult(
            name=target.label(),
            title=target.url,
            family="external",
            version="",  # not ours to ask
            levels=[],
            url=target.url,
            sampled=target.pid is not None,
        )
        self.by_name[result.name] = result
        self.run.stacks.append(result)
        return result

    def finish(self, interrupted: str | None = None) -> BenchRun:
        self.run.stacks = [judge(st) for st in self.run.stacks]
        self.run.interrupted = interrupted
        return self.run


def judge(result: StackResult) -> StackResult:
    """Apply the breaking-point rule (stackrace.ramp, shared with the app) to the levels."""
    steps = [
        # a server not sampled has no CPU figure: its 0 must not read as an idle server
        step_result(lv.level, lv.window, lv.cpu_percent if result.sampled else None, None)
        for lv in result.levels
        if not lv.db_down
    ]
    bp = find_breaking_point(steps)
    if bp is None:
        return msgspec.structs.replace(
            result, breaking_point=None, breaking_kind="", breaking_reason=""
        )
    return msgspec.structs.replace(
        result, breaking_point=bp.level, breaking_kind=bp.kind, breaking_reason=bp.reason
    )


class _Acc:
    """One level of one stack across repeats."""

    def __init__(self) -> None:
        self.windows: list[WindowStats] = []
        self.hist: LatencyHistogram | None = None
        self.hist_unc: LatencyHistogram | None = None
        self.cpu: list[float] = []
        self.cpu_us: list[float] = []
        self.wait: list[float] = []
        self.engine_cpu: list[float] = []
        self.saturated = False
        self.db_down = False


def merge_windows(
    windows: list[WindowStats],
    hist: LatencyHistogram | None = None,
    hist_unc: LatencyHistogram | None = None,
) -> WindowStats:
    """Repeats of a level as one window: counts add; latencies come from the repeats'
    merged histograms (`hist`, and `hist_unc` in rate mode); the requests in flight are
    the time-average over all repeats; the other gauges (waiting, the oldest wait, the
    engine's lag and CPU) are the last repeat's."""
    if len(windows) == 1:
        return windows[0]
    out = msgspec.structs.replace(windows[-1])
    if hist is not None:
        out.latency = hist.summary()
    if hist_unc is not None and out.latency_uncorrected is not None:
        out.latency_uncorrected = hist_unc.summary()
    out.seconds = sum(w.seconds for w in windows)
    if out.seconds > 0:
        out.in_flight = sum(w.in_flight * w.seconds for w in windows) / out.seconds
    out.sent = sum(w.sent for w in windows)
    out.carried_in = sum(w.carried_in for w in windows)
    out.requests = sum(w.requests for w in windows)
    out.ok = sum(w.ok for w in windows)
    out.bytes = sum(w.bytes for w in windows)
    out.late = sum(w.late for w in windows)
    failures: dict[str, int] = {}
    status: dict[int, int] = {}
    for w in windows:
        for k, n in w.failures.items():
            failures[k] = failures.get(k, 0) + n
        for c, n in w.status.items():
            status[c] = status.get(c, 0) + n
    out.failures = failures
    out.status = status
    kinds = None
    for w in windows:
        kinds = add_kinds(kinds, w.kinds, gauges=False)
    if kinds is not None and windows[-1].kinds is not None:
        for mine, last in zip(kinds, windows[-1].kinds, strict=False):
            mine.waiting = last.waiting
    out.kinds = kinds
    # waiting of the earlier repeats was answered (or failed) in the later ones
    out.sent -= sum(w.waiting for w in windows[:-1])
    spans = [w.span_seconds for w in windows if w.span_seconds]
    out.span_seconds = sum(spans) if spans else None
    timed = out.span_seconds or out.seconds
    out.rps = out.requests / timed if timed else 0.0
    return out


class LevelRunner:
    """Measures levels of the members it is given, on one RaceCore."""

    def __init__(self, core: RaceCore, plan: BenchPlan, progress: Progress) -> None:
        self.core = core
        self.plan = plan
        self.s = plan.settings
        self.progress = progress

    async def next_interval(self) -> None:
        """Wait for the engine's next snapshot (a fresh interval boundary)."""
        engine = self.core.engine
        seen = engine.latest.seq if engine.latest else -1
        end = time.monotonic() + 5.0
        while time.monotonic() < end:
            await asyncio.sleep(0.01)
            if engine.latest is not None and engine.latest.seq != seen:
                return

    def _crashed(self, ids: list[str]) -> list[str]:
        return [
            i
            for i in ids
            if self.core.members[i].handle.state in (StackState.CRASHED, StackState.STOPPED)
        ]

    async def _set_level(self, ids: list[str], level: int) -> None:
        if self.s.rate is not None:
            await self.core.set_rate(float(level), ids)
        else:
            await self.core.set_concurrency(level, ids)

    async def _warm(self, ids: list[str], full: bool = True) -> None:
        await asyncio.sleep(0.3)  # connections open, retired ones drain
        if not full:
            return
        if self.s.warmup > 0:
            await asyncio.sleep(self.s.warmup)
        if self.s.warmup_requests > 0:
            # a JIT warms with requests, not seconds: go on until each stack has
            # answered this many (bounded: a stack too slow for it stops at the timeout)
            self.core.reset_totals(0.0, ids)
            await self.next_interval()
            end = time.monotonic() + max(60.0, self.s.timeout * 6)
            while time.monotonic() < end:
                await asyncio.sleep(self.core.interval)
                if all(
                    (t := self.core.target(i)) is None or t.total.requests >= self.s.warmup_requests
                    for i in ids
                ):
                    break
                if self._crashed(ids):
                    return

    async def _drain(self, ids: list[str]) -> None:
        """Stop sending and wait until nothing is in flight (at most the timeout)."""
        await self.core.set_budget(0, ids)
        end = time.monotonic() + self.s.timeout + 1.0
        while time.monotonic() < end:
            await self.next_interval()
            if all((t := self.core.target(i)) is None or t.interval.waiting == 0 for i in ids):
                return

    async def _measure_budget(self, ids: list[str]) -> None:
        await self._drain(ids)
        await self.next_interval()
        self.core.reset_totals(0.0, ids)
        n = self.s.requests or 0
        await self.core.set_budget(n, ids)
        # Every request ends within the timeout, so this ends; a stall longer than the
        # timeout (nothing answered, nothing failed) ends it too, with the rest waiting.
        last_progress = time.monotonic()
        done_before = -1
        while True:
            await asyncio.sleep(self.core.interval)
            snaps = [self.core.target(i) for i in ids]
            done = sum(t.total.attempts for t in snaps if t is not None)
            if all(t is None or (t.total.attempts >= n and t.total.waiting == 0) for t in snaps):
                break
            if done != done_before:
                done_before, last_progress = done, time.monotonic()
            elif time.monotonic() - last_progress > self.s.timeout + 2.0:
                self.progress("  no answer or failure for longer than the timeout: level ends")
                break
            if self._crashed(ids):
                break
        await self.next_interval()  # the last answers reach the totals
        await self.core.set_budget(None, ids)

    async def _measure_time(self, ids: list[str]) -> None:
        await self.next_interval()
        self.core.reset_totals(0.0, ids)
        end = time.monotonic() + self.s.duration
        while time.monotonic() < end:
            await asyncio.sleep(min(self.core.interval, max(0.0, end - time.monotonic())))
            if self._crashed(ids):
                break
        await self.next_interval()  # the last interval reaches the totals

    async def level(self, ids: list[str], level: int) -> dict[str, Level]:
        accs = {i: _Acc() for i in ids}
        before = {i: self.core.sample_now(i) for i in ids}
        for k in range(self.s.repeat):
            live = [i for i in ids if i not in self._crashed(ids)]
            if not live:
                break
            await self._set_level(live, level)
            # the load goes on between repeats, so the stacks stay warm: the warm-up
            # (seconds, requests) comes once per level, before its first repeat
            await self._warm(live, full=k == 0)
            started = time.monotonic()
            if self.s.requests and self.s.rate is None:
                await self._measure_budget(live)
            else:
                await self._measure_time(live)
            watch = self.plan.database
            down = watch is not None and bool(watch.down_during(started, time.monotonic()))
            for i in live:
                self._take(i, accs[i], down)
        return self._levels(ids, level, accs, before)

    def _take(self, i: str, a: _Acc, down: bool) -> None:
        """Add the measured window of member `i` (its totals, histograms, CPU) to `a`."""
        t = self.core.target(i)
        if t is None:
            return
        snap = self.core.engine.latest
        a.windows.append(t.total)
        h = self.core.engine.total_histogram(i)
        if a.hist is None:
            a.hist = h
        else:
            a.hist.add(h)
        if self.s.rate is not None:
            hu = self.core.engine.total_histogram(i, uncorrected=True)
            if a.hist_unc is None:
                a.hist_unc = hu
            else:
                a.hist_unc.add(hu)
        res = self.core.sample_now(i)
        if res is not None:
            a.cpu.append(res.cpu_percent)
            a.wait.append(res.cpu_wait_percent)
        per = self.core.cpu_per_request_us(i, t.total.requests)
        if per is not None:
            a.cpu_us.append(per)
        a.engine_cpu.append(t.total.engine_cpu)
        a.saturated |= t.saturated or bool(snap and snap.saturated and snap.procs == 1)
        a.db_down |= down

    def _levels(
        self,
        ids: list[str],
        level: int | dict[str, float],
        accs: dict[str, _Acc],
        before: dict[str, ResourceSample | None],
    ) -> dict[str, Level]:
        out: dict[str, Level] = {}
        for i in ids:
            a = accs[i]
            if not a.windows:
                continue
            window = merge_windows(a.windows, a.hist, a.hist_unc)
            after = self.core.members[i].resources or before[i]
            load = level[i] if isinstance(level, dict) else level
            out[i] = self._level(load, window, a, before[i], after)
        return out

    async def probe(
        self, loads: dict[str, float], needed: int, min_s: float, max_s: float
    ) -> dict[str, Level]:
        """One probe of a capacity search (race/capacity_run.py) for each member at its
        own load, all at once: set each load, warm up, then measure until every member
        has `needed` answers (and at least `min_s`), or `max_s` has passed. A level is
        returned per member measured (a crashed one has none)."""
        ids = list(loads)
        before = {i: self.core.sample_now(i) for i in ids}

        # all at once first (a rate opens its connections once, core.set_rate), then
        # each member at its own load
        def asked(load: float) -> int:  # a rate as asked; connections are whole
            return load if self.s.rate is not None else round(load)  # type: ignore[return-value]

        await self._set_level(ids, asked(min(loads.values())))
        for i, load in loads.items():
            await self._set_level([i], asked(load))
        await self._warm(ids)
        started = time.monotonic()
        await self.next_interval()
        self.core.reset_totals(0.0, ids)
        t0 = time.monotonic()
        while time.monotonic() - t0 < max_s:
            await asyncio.sleep(self.core.interval)
            if self._crashed(ids):
                break
            if time.monotonic() - t0 >= min_s and all(
                (t := self.core.target(i)) is None or t.total.requests >= needed for i in ids
            ):
                break
        await self.next_interval()  # the last interval reaches the totals
        watch = self.plan.database
        down = watch is not None and bool(watch.down_during(started, time.monotonic()))
        accs = {i: _Acc() for i in ids}
        for i in ids:
            if i not in self._crashed(ids):
                self._take(i, accs[i], down)
        return self._levels(ids, loads, accs, before)

    def _level(
        self,
        level: float,
        window: WindowStats,
        a: _Acc,
        before: ResourceSample | None,
        after: ResourceSample | None,
    ) -> Level:
        s = self.s
        rate_mode = s.rate is not None
        check = None
        if not rate_mode:
            check = accounting.little_check(window, round(level), budget=bool(s.requests))
        share = accounting.engine_share(window)
        limit = accounting.engine_limit(window, a.saturated)
        return Level(
            concurrency=0 if rate_mode else round(level),
            rate=float(level) if rate_mode else None,
            window=window,
            memory_before=Memory(rss=before.rss, uss=before.uss) if before else Memory(),
            memory_after=Memory(rss=after.rss, uss=after.uss) if after else Memory(),
            cpu_percent=statistics.median(a.cpu) if a.cpu else 0.0,
            engine_cpu=statistics.median(a.engine_cpu) if a.engine_cpu else 0.0,
            engine_saturated=a.saturated,
            hdr=a.hist.encode_base64() if a.hist is not None else "",
            samples=[w.rps for w in a.windows],
            cpu_us_per_request=statistics.median(a.cpu_us) if a.cpu_us else None,
            cpu_wait_percent=statistics.median(a.wait) if a.wait else 0.0,
            engine_share=share,
            engine_limited=bool(limit),
            engine_limit=limit,
            little=LittleLaw(
                check.connections, check.in_flight, check.explained, check.ok, check.reason
            )
            if check
            else None,
            db_down=a.db_down,
            keepalive=s.keepalive,
        )


def describe(name: str, lv: Level, rate_mode: bool) -> str:
    """One progress line per level: the accounting in full."""
    w = lv.window
    fails = sum(n for k, n in w.failures.items())
    # no answer, no latency: "p99 0.00 ms" would read as the fastest level of all
    p99 = f"{lv.latency.p99 / 1000:8.2f} ms" if lv.answered else "no answers"
    line = (
        f"  {name:<28} {'rate' if rate_mode else 'c'}={lv.level:<6} "
        f"{lv.rps:>9,.0f} req/s  p99 {p99}  "
        f"sent {w.sent:,} = {w.requests:,} answered + {w.lost:,} failed + {w.waiting:,} waiting"
    )
    if fails:
        line += f"  failures {fails:,}"
    if lv.little is not None and not lv.little.ok:
        line += f"  [Little: {lv.little.reason}]"
    if lv.engine_limited:
        line += f"  [engine-limited: {lv.engine_limit}]"
    if lv.db_down:
        line += "  [DATABASE FAULT: down, restarted or its tables gone; not judged]"
    return line


async def run_bench(
    plan: BenchPlan,
    progress: Progress = lambda s: None,
    recorder: BenchRecorder | None = None,
    parts: RaceParts | None = None,
) -> BenchRun:
    """Run the plan; results go into `recorder` level by level (pass one to keep them if
    the run is cancelled). `parts`: the engine and stacks made elsewhere (--cluster)."""
    s = plan.settings
    placement, why = plan_placement(s, plan.members, parts)
    rec = recorder or BenchRecorder(plan, placement, why)
    progress(f"isolation: {placement.isolation} ({why}); {placement.note}")
    if parts is not None and parts.note:
        progress(parts.note)
    # with a request budget a level lasts a second or two: short intervals keep the
    # level's edges sharp
    engine_settings = EngineSettings(timeout=s.timeout, interval=0.05 if s.requests else 0.25)
    source: StackStarter
    if parts is None:
        engine: LoadEngine = Engine(
            engine_settings, per_target=True, allow_remote=plan.allow_remote
        )
        source = StacksSource(stacks_file=plan.stacks_file, defs={}, memory_max=s.memory_max)
    else:
        engine = parts.engine(engine_settings)
        source = parts.source
    source.use_database(plan.db_env)
    core = RaceCore(engine, source, s, interval=engine_settings.interval)
    if plan.on_core is not None:
        plan.on_core(core)
    core.concurrency = 0
    runner = LevelRunner(core, plan, progress)
    await core.start([], placement=placement)
    watch = plan.database
    if watch is not None:
        await watch.start()
    try:
        if plan.urls:
            progress(
                "servers you started: "
                + ", ".join(
                    f"{u.label()} ({u.url}, "
                    + (f"pid {u.pid} sampled" if u.pid else "memory and CPU not sampled: no --pid")
                    + ")"
                    for u in plan.urls
                )
                + "; not pinned (not ours to place)"
            )
        groups = (
            [[k] for k in range(plan.members)]
            if placement.isolation == "rotate"
            else [list(range(plan.members))]
        )
        for group in groups:
            if watch is not None and watch.faulty:  # down, or its tables gone
                for k in group:
                    if k >= len(plan.stacks):
                        res = rec.url(plan.urls[k - len(plan.stacks)])
                    else:
                        res = rec.stack(plan.stacks[k], placement.stack_cpus[k])
                    res.error = f"not measured: {watch.describe()}"
                    progress(f"✗ {res.name}: {res.error}")
                continue
            ids = _start_group(core, source, rec, plan, placement, group, progress)
            ids += await _join_urls(core, rec, plan, placement, group, progress)
            timeout = max(
                [
                    120.0,
                    *(plan.stacks[k].spec.ready_timeout + 5 for k in group if k < len(plan.stacks)),
                ]
            )
            await core.wait_ready(ids, timeout=timeout)
            running = []
            for i in ids:
                m = core.members[i]
                if m.attached:
                    running.append(i)
                    continue
                state = m.handle.state
                why = (
                    m.refused
                    or getattr(m.handle, "error", None)
                    or (
                        f"{state} before its load began"
                        if state in (StackState.CRASHED, StackState.STOPPED)
                        else f"not ready within {timeout:g}s"
                    )
                )
                rec.by_name[i].error = why.split("\n")[0]
                progress(f"✗ {i}: {why}")
                await core.stop_member(i)
            if plan.capacity is not None and running:
                found = await search_capacity(runner, running, plan.capacity, progress)
                for i in running:
                    rec.by_name[i].capacity = found.get(i)
                    if i in found:
                        progress(f"{i}: {found[i].sentence}")
                    if core.members[i].handle.state in (StackState.CRASHED, StackState.STOPPED):
                        rec.by_name[i].error = "crashed during its capacity search"
            for level in [] if plan.capacity is not None else s.levels:
                if not running:
                    break
                got = await runner.level(running, level)
                for i in list(running):
                    lv = got.get(i)
                    if lv is not None:
                        rec.by_name[i].levels.append(lv)
                        progress(describe(i, lv, s.rate is not None))
                    if core.members[i].handle.state in (StackState.CRASHED, StackState.STOPPED):
                        tail = "\n".join(core.members[i].handle.log_tail(12))
                        rec.by_name[i].error = f"crashed during level {level}"
                        progress(f"✗ {i}: crashed during level {level}\n{tail}")
                        running.remove(i)
                    elif lv is not None and lv.requests == 0 and level != s.levels[-1]:
                        progress(f"  {i}: no responses at {level}; skipping higher levels")
                        running.remove(i)
            if s.own_requests and running:
                # your app's requests: nothing may be in flight when it stops, so that
                # what it was sent and what it answered are both known, per request
                await runner._drain(running)
                _record_paths(core, rec, running, s)
            for i in ids:
                await core.stop_member(i)
    finally:
        await core.stop()
        if watch is not None:
            await watch.stop()
            for i in watch.intervals:
                rec.run.notes.append(
                    f"database {i.kind}: {i.cause} (levels measured then are marked and not judged)"
                )
    return rec.finish()


def _record_paths(core: RaceCore, rec: BenchRecorder, ids: list[str], s: RaceSettings) -> None:
    """Each of your requests over the whole run, per stack (the target's never-restarted
    per-kind figures; a single request: its totals are the stack's)."""
    kinds = s.request_kinds() or []
    for i in ids:
        t = core.target(i)
        if t is None:
            continue
        if t.kinds_run is not None:
            rec.by_name[i].paths = [
                PathResult(
                    name=kind.label,
                    sent=k.sent,
                    answered=k.answered,
                    errors=k.errors,
                    failed=k.failed,
                    waiting=k.waiting,
                    status=dict(k.status),
                )
                for kind, k in zip(kinds, t.kinds_run, strict=False)
            ]


def _start_group(
    core: RaceCore,
    source: StackStarter,
    rec: BenchRecorder,
    plan: BenchPlan,
    placement: Placement,
    group: list[int],
    progress: Progress,
) -> list[str]:
    """Launch the stacks of one group (all of them, or one when rotating)."""
    ids = []
    for k in group:
        if k >= len(plan.stacks):
            continue  # a --url server: _join_urls
        stack = plan.stacks[k]
        if stack.name in rec.by_name:
            progress(f"{stack.name}: named twice; measured once")
            continue
        cpus = placement.stack_cpus[k]
        rec.stack(stack, cpus)
        progress(f"{stack.name}: starting")
        handle = source.start_stack(stack, cpus)
        core.members[handle.id] = Member(handle, stack_cpus=cpus, engine_cpus=placement.engine_cpus)
        ids.append(handle.id)
    return ids


async def _join_urls(
    core: RaceCore,
    rec: BenchRecorder,
    plan: BenchPlan,
    placement: Placement,
    group: list[int],
    progress: Progress,
) -> list[str]:
    """The group's servers started by hand, as members keyed by their names: reachable
    ones only (one that refuses the connection is an error, not a level of failures)."""
    ids = []
    for k in group:
        if k < len(plan.stacks):
            continue
        target = plan.urls[k - len(plan.stacks)]
        result = rec.url(target)
        problem = await _unreachable(target.url)
        if problem:
            result.error = f"not reachable at {target.url}: {problem}"
            progress(f"✗ {result.name}: {result.error}")
            continue
        handle = UrlHandle(target, k, id=result.name)
        core.members[handle.id] = Member(handle, engine_cpus=placement.engine_cpus)
        ids.append(handle.id)
    return ids


async def _unreachable(url: str, timeout: float = 5.0) -> str:
    """Why a TCP connection to the URL's server cannot be made ("": it can)."""
    from stackrace.engine.request import parse_url

    u = parse_url(url)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(u.host, u.port), timeout)
    except TimeoutError:
        return f"no connection within {timeout:g}s"
    except OSError as exc:
        return exc.strerror or str(exc)
    writer.close()
    return ""
