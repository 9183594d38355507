"""Bench's driver: `stackrace bench` without the printing, the race core driven by a plan
(as race/load/driver.py is `load`'s).

    run = await run_bench(BenchPlan(stacks, settings), progress=print)
    run = await run_bench(plan, parts=synthetic_parts()[0])   # the models, no servers

The stacks are raced exactly as the app races them (race/core/core.py: per-stack engine
processes, the same placement), level by level, each level measured as
race/bench/protocol.py's `LevelRunner` says (closed loop, `--requests N`, `--rate R`,
`--repeat N`: its docstring is the one description).

Servers the user started (`--url`, race/core/urls.py) are members like the stacks: placed
(they count when bench decides whether every member gets cores of its own), grouped and
rotated with them, loaded and drained the same way; but never started, pinned or
stopped, checked only for a connection before their first level, and sampled only when
their pid was given. A member that left a rotation is never loaded again.

Each level keeps the engine's complete accounting (answered, failed by kind, waiting),
the Little's-law check, the engine's share of the latency, the stack's CPU (and CPU
time per request), memory before and after, and whether the database was down. A stack
that crashes ends its levels at once. Results are collected as they are measured, so
an interrupted run keeps every finished level (`BenchResults`, race/bench/results.py).
"""

from __future__ import annotations

import asyncio
import os

from stackrace.engine.client import Engine
from stackrace.engine.model import EngineSettings
from stackrace.engine.request import parse_url
from stackrace.race.bench.capacity_driver import capacity_rounds, search_capacity
from stackrace.race.bench.protocol import BenchPlan, LevelRunner, Progress
from stackrace.race.bench.results import BenchResults, describe, record_paths
from stackrace.race.bench.resume import RunLog, resume_finished, resumed_levels
from stackrace.race.core.capacity_plan import interrupted
from stackrace.race.core.core import RaceCore
from stackrace.race.core.members import LoadEngine, RaceParts, StackStarter
from stackrace.race.core.placement import CorePlacement, choose_isolation, place
from stackrace.race.core.series import SeriesRecorder
from stackrace.race.core.stack_source import StacksFileSource
from stackrace.race.core.state import StackState
from stackrace.race.core.urls import UrlHandle
from stackrace.report.judged import breaking
from stackrace.report.schema import (
    BenchRun,
    CapacityProbe,
    CapacityResult,
)
from stackrace.report.why import cause_line
from stackrace.settings.race_settings import RaceSettings
from stackrace.stacks.listen import exposure_line


async def capture_at_breaking(
    core: RaceCore, rec: BenchResults, ids: list[str], level: int, progress: Progress
) -> None:
    """Each stack whose breaking point (by the rules, on its levels so far) is this
    level gets one evidence window, captured with the level's load still on; the window
    and its cause go with the level (`Level.why`) and onto the breaking-point line."""
    started = []
    for i in ids:
        res = rec.by_name[i]
        m = core.members.get(i)
        if m is None or not res.levels or res.levels[-1].level != level:
            continue
        if m.handle.state in (StackState.CRASHED, StackState.STOPPED):
            continue
        bp = breaking(res, rec.run)
        first = not any(lv.why for lv in res.levels)
        if bp is not None and bp.level == level and first and core.evidence.want(m, level):
            started.append(i)
    if not started:
        return
    secs = core.evidence.seconds
    progress(f"  evidence: {', '.join(started)} broke at {level:,}; {secs:g} s of samples")
    await core.evidence.settle(timeout=core.evidence.seconds + 20)
    for i in started:
        got = core.evidence.at(i, level)
        if got is not None:
            rec.by_name[i].levels[-1].why = got
            progress(f"  {i}: why: {cause_line(got)}")
        elif i in core.evidence.failed:
            progress(f"  {i}: {core.evidence.failed[i]}")


def plan_placement(
    settings: RaceSettings, n_stacks: int, parts: RaceParts | None = None
) -> tuple[CorePlacement, str]:
    """Where the stacks and engines run: here, or (with `parts`) on other hosts, where the
    stacks' host gives every core to the stacks."""
    here = parts is None
    cores = sorted(os.sched_getaffinity(0)) if parts is None else list(parts.cores)
    # with the engines elsewhere they need no core of the stacks' host
    isolation, why = choose_isolation(
        settings.isolation, n_stacks, settings.cpus, len(cores) + (0 if here else 1)
    )
    return place(isolation, n_stacks, settings.cpus, cores, engine_here=here), why


async def run_bench(
    plan: BenchPlan,
    progress: Progress = lambda s: None,
    results: BenchResults | None = None,
    parts: RaceParts | None = None,
) -> BenchRun:
    """Run the plan; results go into `results` level by level (pass one to keep them if
    the run is cancelled). `parts`: the engine and stacks made elsewhere (--cluster)."""
    s = plan.settings
    placement, why = plan_placement(s, plan.members, parts)
    rec = results or BenchResults(plan, placement, why)
    log = RunLog(plan)
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
        source = StacksFileSource(stacks_file=plan.stacks_file, defs={}, memory_max=s.memory_max)
    else:
        engine = parts.engine(engine_settings)
        source = parts.source
    source.use_database(plan.db_env)
    core = RaceCore(engine, source, s, interval=engine_settings.interval)
    if parts is not None and parts.clock is not None:
        core.clock = parts.clock
    if plan.on_core is not None:
        plan.on_core(core)
    series = SeriesRecorder(core)  # the run second by second (race/core/series.py)
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
        searched: list[list[str]] = []  # each group's members that a search measured
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
            if s.rate is None and s.levels:
                # a member starts loading at the core's level once it is ready: make
                # that the first level it will be measured at, not the last level of
                # the group before. Attached at c=1000 and then lowered to c=1, a
                # one-worker server was left ~1,000 requests of closed connections in
                # its accept queue to serve first (10 s at 10 ms each): its c=1 level
                # answered nothing. No member is attached between groups.
                await core.set_level(s.levels[0], ids=[])
            group = resume_finished(plan, rec, placement, group, progress)
            if not group:
                continue
            ids = _start_group(core, source, rec, plan, placement, group, progress)
            ids += await _join_urls(core, rec, plan, group, progress)
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
                    or m.handle.error
                    or (
                        f"{state} before its load began"
                        if state in (StackState.CRASHED, StackState.STOPPED)
                        else f"not ready within {timeout:g}s"
                    )
                )
                # the stack's name is in every line that shows the error: not twice
                rec.by_name[i].error = why.split("\n")[0].removeprefix(f"{i}: ")
                progress(f"✗ {i}: {why.removeprefix(f'{i}: ')}")
                log.done(i, rec.by_name[i].error)
                await core.stop_member(i)
            for i in running:
                log.started(rec.by_name[i])
            if plan.capacity is not None and running:
                found: dict[str, CapacityResult] = {}
                prior: dict[str, list[CapacityProbe]] = {}
                if plan.resume is not None:
                    prior = {i: plan.resume.probes[i] for i in running if i in plan.resume.probes}
                ended = False
                try:
                    await search_capacity(
                        runner, running, plan.capacity, progress,
                        on_result=log.probe, into=found, prior=prior, noise=plan.noise,
                    )  # fmt: skip
                    ended = True
                finally:
                    # an interrupted search keeps its probes, and claims no capacity
                    for i in running:
                        c = found.get(i)
                        if c is not None and not ended and not c.stopped:
                            c = interrupted(c)
                        rec.by_name[i].capacity = c
                searched.append([i for i in running if i in found])
                for i in running:
                    if i in found:
                        progress(f"{i}: {found[i].sentence}")
                    if core.members[i].handle.state in (StackState.CRASHED, StackState.STOPPED):
                        rec.by_name[i].error = "crashed during its capacity search"
                    log.done(i, rec.by_name[i].error)
            done_before = resumed_levels(plan, rec, running)
            measured: dict[int, list[str]] = {}  # round 1's levels, for the rounds after it
            for level in [] if plan.capacity is not None else s.levels:
                if not running:
                    break
                todo = [i for i in running if level not in done_before.get(i, ())]
                if not todo:
                    continue
                got = await runner.level(todo, level)
                for i in list(todo):
                    lv = got.get(i)
                    if lv is not None:
                        rec.by_name[i].levels.append(lv)
                        measured.setdefault(level, []).append(i)
                        progress(describe(i, lv, s.rate is not None))
                # a stack that broke at this level: its evidence, while the load goes on
                await capture_at_breaking(core, rec, todo, level, progress)
                for i in list(todo):
                    lv = got.get(i)
                    if lv is not None and s.repeat == 1:  # with rounds: once they are all in
                        log.level(i, lv)
                    if core.members[i].handle.state in (StackState.CRASHED, StackState.STOPPED):
                        tail = "\n".join(core.members[i].handle.log_tail(12))
                        rec.by_name[i].error = f"crashed during level {level}"
                        progress(f"✗ {i}: crashed during level {level}\n{tail}")
                        running.remove(i)
                    elif lv is not None and lv.requests == 0 and level != s.levels[-1]:
                        progress(f"  {i}: no responses at {level}; skipping higher levels")
                        running.remove(i)
            if s.repeat > 1 and measured:
                await _more_rounds(runner, rec, log, measured, progress)
                running = [i for i in running if not rec.by_name[i].error]
            if s.own_requests and running:
                # your app's requests: nothing may be in flight when it stops, so that
                # what it was sent and what it answered are both known, per request
                await runner.drain(running)
                record_paths(core, rec, running, s)
            if plan.capacity is None:
                for i in running:
                    log.done(i, rec.by_name[i].error)
            for i in ids:
                await core.stop_member(i)
        if plan.capacity is not None and s.repeat > 1 and searched:
            await _capacity_rounds(core, source, runner, rec, plan, placement, searched, progress)
    finally:
        await core.stop()
        series.flush()
        for name, res in rec.by_name.items():
            res.series = series.result(name) or res.series
        final = core.engine.latest
        for loss in final.lost if final is not None else []:
            rec.run.notes.append(loss.describe())
        for m in core.members.values():  # an app's own socket beyond loopback: in outputs
            for address in m.exposed:
                line = exposure_line(m.handle.name, address)
                rec.run.notes.append(line)
                progress(f"⚠ {line}")
        if watch is not None:
            await watch.stop()
            for down in watch.intervals:
                rec.run.notes.append(
                    f"database {down.kind}: {down.cause} (levels measured then are marked and "
                    "not judged)"
                )
    return rec.finish()


async def _more_rounds(
    runner: LevelRunner,
    rec: BenchResults,
    log: RunLog,
    measured: dict[int, list[str]],
    progress: Progress,
) -> None:
    """`--repeat N`: rounds 2 … N of the levels round 1 measured, interleaved in a
    shuffled order (race/bench/protocol.py); each level then holds all its rounds, its
    evidence from round 1, and goes to the journal."""
    merged = await runner.more_rounds(measured, seed=int.from_bytes(os.urandom(4), "big"))
    for level, got in merged.items():
        for i, lv in got.items():
            levels = rec.by_name[i].levels
            for k, old in enumerate(levels):
                if old.level == level and not old.samples[1:]:
                    lv.why = old.why
                    levels[k] = lv
            log.level(i, lv)
            progress(describe(i, lv, runner.s.rate is not None))
    for i in {i for ids in measured.values() for i in ids}:
        if runner.core.members[i].handle.state in (StackState.CRASHED, StackState.STOPPED):
            rec.by_name[i].error = rec.by_name[i].error or "crashed during its rounds"
            progress(f"✗ {i}: crashed during its rounds")


async def _capacity_rounds(
    core: RaceCore,
    source: StackStarter,
    runner: LevelRunner,
    rec: BenchResults,
    plan: BenchPlan,
    placement: CorePlacement,
    searched: list[list[str]],
    progress: Progress,
) -> None:
    """`--capacity --repeat N`: rounds 2 … N of every capacity found, the groups in a
    shuffled order, each started afresh (race/bench/capacity_driver.py capacity_rounds)."""
    assert plan.capacity is not None
    index = {st.name: k for k, st in enumerate(plan.stacks)}
    urls = {u.label(): k for k, u in enumerate(plan.urls)}

    async def start(ids: list[str]) -> list[str]:
        for i in ids:
            if i in index:
                k = index[i]
                cpus = placement.stack_cpus[k]
                progress(f"{i}: starting (a fresh start for its round)")
                core.add_member(source.start_stack(plan.stacks[k], cpus), cpus)
            elif i in urls:  # not ours to start: joined again as it is
                core.add_member(UrlHandle(plan.urls[urls[i]], len(plan.stacks) + urls[i], id=i))
        await core.wait_ready(ids, timeout=120.0)
        return [i for i in ids if i in core.members and core.members[i].attached]

    async def stop(ids: list[str]) -> None:
        for i in ids:
            await core.stop_member(i)

    found = {i: c for i, res in rec.by_name.items() if (c := res.capacity) is not None}
    await capacity_rounds(
        runner, plan.capacity, searched, found, int.from_bytes(os.urandom(4), "big"),
        start, stop, progress, noise=plan.noise,
    )  # fmt: skip
    for i, c in found.items():
        if c.rounds:
            rec.by_name[i].capacity = c
            progress(f"{i}: {c.sentence}")


def _start_group(
    core: RaceCore,
    source: StackStarter,
    rec: BenchResults,
    plan: BenchPlan,
    placement: CorePlacement,
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
        core.add_member(handle, cpus)
        ids.append(handle.id)
    return ids


async def _join_urls(
    core: RaceCore, rec: BenchResults, plan: BenchPlan, group: list[int], progress: Progress
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
        core.add_member(handle)
        ids.append(handle.id)
    return ids


async def _unreachable(url: str, timeout: float = 5.0) -> str:
    """Why a TCP connection to the URL's server cannot be made ("": it can)."""

    u = parse_url(url)
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(u.host, u.port)
    except TimeoutError:
        return f"no connection within {timeout:g}s"
    except OSError as exc:
        return exc.strerror or str(exc)
    writer.close()
    return ""
