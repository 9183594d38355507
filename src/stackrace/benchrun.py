"""`stackrace bench` without the printing: plan → started stacks → levels → a BenchRun.

Isolation:
- "rotate": one stack at a time (start, every level, stop), so no stack takes CPU from
  another on a small machine;
- "parallel": every stack at once, each level for all together, each stack pinned to a
  core of its own when there are enough cores.
"auto" picks parallel only when every stack and the engine can have a core of their own.
The engine is pinned away from the servers whenever the machine has a core to spare.
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
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import psutil

from stackrace import __version__
from stackrace.config import Stack, placeholders, render
from stackrace.engine.client import Engine
from stackrace.engine.histogram import LatencyHistogram
from stackrace.engine.model import EngineSettings, TargetSpec, WindowStats
from stackrace.ramp import attempts, find_breaking_point, step_result
from stackrace.report.schema import (
    SCHEMA_VERSION,
    BenchRun,
    Level,
    Machine,
    Memory,
    Settings,
    StackResult,
)
from stackrace.stacks.launcher import Launcher, LaunchError, RunningStack
from stackrace.stacks.sampler import TreeSampler
from stackrace.workloads import WORKLOADS

Progress = Callable[[str], None]


@dataclass
class BenchPlan:
    stacks: list[Stack]
    workload: str = "hello"
    io_ms: int = 10
    queries: int = 10
    concurrency: list[int] = field(default_factory=lambda: [10, 100])
    duration: float = 10.0
    warmup: float = 2.0
    rate: float | None = None
    requests: int | None = None  # end a level after this many requests (ab's -n)
    isolation: str = "auto"
    repeat: int = 1
    timeout: float = 10.0
    cpus: int | None = None  # give the servers this many cores (e.g. 1 for the VPS preset)
    memory_max: str | None = None
    preset: str | None = None
    db_env: dict[str, str] = field(default_factory=dict)
    # carried from presets; their effect on the load is being built on main (not here yet)
    keepalive: bool = True  # False: every request on a new connection, as ab without -k
    warmup_requests: int = 0  # warm up by this many requests as well as by time

    @property
    def path(self) -> str:
        return WORKLOADS[self.workload].path(self.io_ms, self.queries)


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
    except (OSError, subprocess.TimeoutExpired):
        return ""
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0][:80] if text else ""


def choose_isolation(plan: BenchPlan, cores: int) -> tuple[str, str]:
    if plan.isolation in ("rotate", "parallel"):
        return plan.isolation, "as asked"
    per_stack = plan.cpus or 1
    if cores >= len(plan.stacks) * per_stack + 1:
        return "parallel", f"{cores} cores: each stack and the engine get their own"
    return "rotate", (
        f"{cores} cores are too few for {len(plan.stacks)} stacks and the "
        "engine to have cores of their own: one stack at a time"
    )


def core_plan(
    isolation: str, n_stacks: int, per_stack: int | None, cores: list[int]
) -> tuple[list[int] | None, list[list[int] | None]]:
    """(engine cpus, cpus per stack): the engine on the last core, servers on the others."""
    if len(cores) < 2:
        return None, [None] * n_stacks
    engine = [cores[-1]]
    rest = cores[:-1]
    if isolation == "rotate":
        take = rest[: per_stack or len(rest)]
        return engine, [take] * n_stacks
    per = per_stack or max(1, len(rest) // max(1, n_stacks))
    plan: list[list[int] | None] = []
    for i in range(n_stacks):
        chunk = rest[i * per : (i + 1) * per]
        plan.append(chunk or None)
    return engine, plan


class _Level:
    """Collects one level of one target across repeats."""

    def __init__(self) -> None:
        self.hist = LatencyHistogram()
        self.requests = self.ok = 0
        self.seconds = 0.0
        self.failures: dict[str, int] = {}
        self.status: dict[int, int] = {}
        self.samples: list[float] = []
        self.cpu: list[float] = []
        self.engine_cpu: list[float] = []
        self.saturated = False
        self.uncorrected: LatencyHistogram | None = None


async def _measure(
    engine: Engine,
    plan: BenchPlan,
    running: list[tuple[RunningStack, TreeSampler]],
    level: int,
    progress: Progress,
) -> list[Level]:
    acc = {rs.name: _Level() for rs, _ in running}
    before = {rs.name: sampler.sample() for rs, sampler in running}
    for _ in range(plan.repeat):
        for rs, _ in running:
            if plan.rate is not None:
                await engine.set_rate(float(level), rs.name)
            else:
                await engine.set_concurrency(level, rs.name)
        await asyncio.sleep(0.3)  # connections open, retired ones drain
        engine.reset_totals(plan.warmup)
        await asyncio.sleep(plan.warmup)
        if plan.requests:
            await _start_budget(engine, [rs.name for rs, _ in running], plan)
        for _, sampler in running:
            sampler.sample()  # CPU is measured from here
        end = time.monotonic() + plan.duration
        cpu_seen: list[float] = []
        saturated = False
        while time.monotonic() < end:
            await asyncio.sleep(engine.settings.interval)
            snap = engine.latest
            if snap is None or snap.warming:
                continue
            cpu_seen.append(snap.engine_cpu)
            saturated |= snap.saturated
            if plan.requests and all(
                (t := snap.target(rs.name)) is not None and attempts(t.total) >= plan.requests
                for rs, _ in running
            ):
                break
        if not plan.requests:
            await asyncio.sleep(engine.settings.interval)  # the last interval reaches the totals
        snap = engine.latest
        for rs, sampler in running:
            a = acc[rs.name]
            t = snap.target(rs.name) if snap else None
            s = sampler.sample()
            a.cpu.append(s.cpu_percent)
            if t is None:
                continue
            w = t.total
            a.requests += w.requests
            a.ok += w.ok
            a.seconds += w.seconds
            for k, n in w.failures.items():
                a.failures[k] = a.failures.get(k, 0) + n
            for k, n in w.status.items():
                a.status[k] = a.status.get(k, 0) + n
            a.samples.append(w.rps)
            a.hist.add(engine.total_histogram(rs.name))
            if w.latency_uncorrected is not None:
                a.uncorrected = a.uncorrected or LatencyHistogram()
                a.uncorrected.add(engine.total_histogram(rs.name, uncorrected=True))
            a.engine_cpu.append(statistics.mean(cpu_seen) if cpu_seen else 0.0)
            a.saturated |= saturated
    out = []
    for rs, sampler in running:
        a = acc[rs.name]
        after = sampler.latest or sampler.sample()
        b = before[rs.name]
        lv = Level(
            concurrency=level if plan.rate is None else 0,
            rate=float(level) if plan.rate is not None else None,
            seconds=a.seconds,
            requests=a.requests,
            ok=a.ok,
            rps=a.requests / a.seconds if a.seconds else 0.0,
            latency=a.hist.summary(),
            latency_uncorrected=a.uncorrected.summary() if a.uncorrected else None,
            failures=a.failures,
            status=a.status,
            memory_before=Memory(rss=b.rss, uss=b.uss),
            memory_after=Memory(rss=after.rss, uss=after.uss),
            cpu_percent=statistics.median(a.cpu) if a.cpu else 0.0,
            engine_cpu=statistics.median(a.engine_cpu) if a.engine_cpu else 0.0,
            engine_saturated=a.saturated,
            hdr=a.hist.encode_base64(),
            samples=a.samples,
        )
        out.append(lv)
        if plan.requests:
            await engine.set_budget(None, rs.name)
        fails = sum(lv.failures.values())
        progress(
            f"  {rs.name:<28} {'rate' if plan.rate else 'c'}={level:<6} "
            f"{lv.rps:>9,.0f} req/s  p99 {lv.latency.p99 / 1000:8.2f} ms  "
            f"failures {fails}" + ("  [engine saturated]" if lv.engine_saturated else "")
        )
    return out


async def _start_budget(engine: Engine, ids: list[str], plan: BenchPlan) -> None:
    """As ab -n: after the warm-up, stop sending, let what is in flight finish (so it does
    not count), then send exactly `plan.requests` and wait for every one of them. A level
    that ended after the first N responses instead would drop the slowest requests, the
    ones still queued behind a busy worker."""
    for tid in ids:
        await engine.set_budget(0, tid)
    quiet_by = time.monotonic() + plan.timeout
    while time.monotonic() < quiet_by:
        await asyncio.sleep(engine.settings.interval)
        snap = engine.latest
        if snap is not None and all(
            (t := snap.target(tid)) is None or attempts(t.interval) == 0 for tid in ids
        ):
            break
    engine.reset_totals(0.0)
    for tid in ids:
        await engine.set_budget(plan.requests, tid)


def _judge(result: StackResult) -> StackResult:
    """Apply the breaking-point rule (stackrace.ramp, shared with the TUI) to the levels."""
    steps = [
        step_result(
            lv.concurrency or int(lv.rate or 0),
            WindowStats(
                seconds=lv.seconds,
                requests=lv.requests,
                ok=lv.ok,
                rps=lv.rps,
                failures=lv.failures,
                status=lv.status,
                latency=lv.latency,
            ),
        )
        for lv in result.levels
    ]
    bp = find_breaking_point(steps)
    if bp is None:
        return result
    return msgspec.structs.replace(result, breaking_point=bp.level, breaking_reason=bp.reason)


async def run_bench(plan: BenchPlan, progress: Progress = lambda s: None) -> BenchRun:
    machine = machine_info()
    cores = sorted(os.sched_getaffinity(0))
    isolation, why = choose_isolation(plan, len(cores))
    engine_cpus, stack_cpus = core_plan(isolation, len(plan.stacks), plan.cpus, cores)
    progress(f"isolation: {isolation} ({why}); engine on cpu {engine_cpus or 'any'}")
    settings = Settings(
        stacks=[s.name for s in plan.stacks],
        workload=plan.workload,
        path=plan.path,
        concurrency=list(plan.concurrency),
        duration=plan.duration,
        warmup=plan.warmup,
        rate=plan.rate,
        isolation=isolation,
        isolation_reason=why,
        timeout=plan.timeout,
        preset=plan.preset,
        repeat=plan.repeat,
    )
    check = WORKLOADS[plan.workload].check(plan.queries)
    results: dict[str, StackResult] = {}
    started = datetime.now(UTC).isoformat(timespec="seconds")

    def pinned(stack: Stack, cpus: list[int] | None) -> Stack:
        spec = stack.spec
        if cpus and spec.cpus is None:
            spec = msgspec.structs.replace(spec, cpus=cpus)
        if plan.memory_max and spec.memory_max is None:
            spec = msgspec.structs.replace(spec, memory_max=plan.memory_max)
        return replace(stack, spec=spec)

    levels = plan.concurrency if plan.rate is None else [int(plan.rate)]
    biggest = max(levels)
    async with (
        Launcher(env=plan.db_env) as launcher,
        # with a request budget a level lasts a second or two: short intervals keep the
        # measured time (whole intervals) close to the time the requests took
        Engine(
            EngineSettings(timeout=plan.timeout, interval=0.05 if plan.requests else 0.25),
            procs=1,
            cpus=engine_cpus,
        ) as engine,
    ):

        async def start(
            stack: Stack, cpus: list[int] | None
        ) -> tuple[RunningStack, TreeSampler] | None:
            results[stack.name] = StackResult(
                name=stack.name,
                title=stack.title,
                family=stack.spec.family,
                version=server_version(stack),
                levels=[],
            )
            try:
                rs = await launcher.start(pinned(stack, cpus))
            except LaunchError as exc:
                progress(f"✗ {exc}")
                results[stack.name].error = str(exc).split("\n")[0]
                return None
            await engine.add_target(
                TargetSpec(id=stack.name, url=rs.url + plan.path, concurrency=0, check=check)
            )
            sampler = TreeSampler(rs.root_pids)
            sampler.mark_before()
            return rs, sampler

        async def finish(rs: RunningStack) -> None:
            await engine.remove_target(rs.name)
            launcher.poll()
            if rs.state == "crashed":
                results[rs.name] = msgspec.structs.replace(
                    results[rs.name], error=f"crashed: {rs.error}"
                )
            await launcher.stop(rs)

        if isolation == "rotate":
            for stack, cpus in zip(plan.stacks, stack_cpus, strict=True):
                progress(f"{stack.name}: starting")
                got = await start(stack, cpus)
                if got is None:
                    continue
                for level in levels:
                    (lv,) = await _measure(engine, plan, [got], level, progress)
                    results[stack.name].levels.append(lv)
                    if lv.requests == 0 and level != biggest and not plan.rate:
                        progress(f"  {stack.name}: no responses at {level}; skipping higher levels")
                        break
                await finish(got[0])
        else:
            running = []
            for stack, cpus in zip(plan.stacks, stack_cpus, strict=True):
                got = await start(stack, cpus)
                if got is not None:
                    running.append(got)
            for level in levels:
                if not running:
                    break
                for lv, (rs, _) in zip(
                    await _measure(engine, plan, running, level, progress), running, strict=True
                ):
                    results[rs.name].levels.append(lv)
            for rs, _ in running:
                await finish(rs)
    ordered = [_judge(results[s.name]) for s in plan.stacks if s.name in results]
    return BenchRun(
        schema=SCHEMA_VERSION, started=started, machine=machine, settings=settings, stacks=ordered
    )
