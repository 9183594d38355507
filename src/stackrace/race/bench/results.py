"""Bench's report assembly: the run being measured, complete at every finished level.

- `BenchResults`: the `BenchRun` (report/schema.py) with the machine's facts, the
  settings and each stack's result, filled level by level (an interrupted run keeps
  every finished level) and judged at the end by the rules (`with_breaking_point`: report/judged.py,
  stackrace.rules.level, the app's judgment too);
- `describe`: a level's progress line, its accounting in full;
- `record_paths`: your requests' figures per stack over the whole run.

Apart from the level protocol (race/bench/protocol.py) and the run (race/bench/driver.py): what is
measured and what is reported change for different reasons.
"""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from stackrace.race.bench.protocol import BenchPlan
from stackrace.race.core.core import RaceCore
from stackrace.race.core.machine import machine_info
from stackrace.race.core.placement import CorePlacement
from stackrace.race.core.urls import UrlTarget
from stackrace.report.failures import path_results
from stackrace.report.judged import breaking, rate_mode
from stackrace.report.judged import steps as judged_steps
from stackrace.report.schema import (
    SCHEMA_VERSION,
    BenchRun,
    Level,
    Settings,
    StackResult,
)
from stackrace.rules.confidence import rounds_interval
from stackrace.rules.knee import ServerPool, knee_miss, predict_knee, stack_pool
from stackrace.settings.race_settings import RaceSettings
from stackrace.stacks.definition import Stack
from stackrace.stacks.placeholders import placeholders, render


def _kind_labels(s: RaceSettings) -> list[str]:
    kinds = s.request_kinds() if s.own_requests else None
    return [f"{k.label} ×{k.weight}" for k in kinds or []]


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


def new_run(plan: BenchPlan, placement: str = "", why: str = "") -> BenchRun:
    """A run with the machine's facts and the plan's settings as given (a journal's
    start keeps `isolation` as asked, e.g. "auto"), and no stack yet."""
    s = plan.settings
    return BenchRun(
        schema=SCHEMA_VERSION,
        started=datetime.now(UTC).isoformat(timespec="seconds"),
        machine=machine_info(),
        settings=Settings(
            **msgspec.structs.asdict(s),
            path=s.path,
            kinds=_kind_labels(s),
            isolation_reason=why,
            placement=placement,
            preset=plan.preset,
            rounds=True,
        ),
        stacks=[],
    )


class BenchResults:
    """The run being measured: complete up to the last finished level at any moment."""

    def __init__(self, plan: BenchPlan, placement: CorePlacement, why: str) -> None:
        self.run = new_run(plan, placement.note, why)
        self.run.settings.isolation = placement.isolation
        self.by_name: dict[str, StackResult] = {}
        # per stack: how many requests it serves at once (rules/knee.py), for the knee
        self.pools: dict[str, ServerPool] = {}

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
        self.pools[stack.name] = stack_pool(stack.spec.family, stack.workers, stack.threads)
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
        self.run.stacks = [
            with_knee(with_breaking_point(st, self.run), self.run, self.pools.get(st.name))
            for st in self.run.stacks
        ]
        self.run.interrupted = interrupted
        return self.run


def with_breaking_point(result: StackResult, run: BenchRun) -> StackResult:
    """Where the stack broke, by the rules (stackrace.rules.level, the app's too)."""
    bp = breaking(result, run)
    if bp is None:
        return msgspec.structs.replace(
            result, breaking_point=None, breaking_kind="", breaking_reason=""
        )
    return msgspec.structs.replace(
        result, breaking_point=bp.level, breaking_kind=bp.kind, breaking_reason=bp.reason
    )


def with_knee(result: StackResult, run: BenchRun, pool: ServerPool | None) -> StackResult:
    """The knee predicted from its pool and first levels (rules/knee.py), and how far
    the measured one came from it."""
    if pool is None or not result.levels:
        return result
    steps = judged_steps(result, run)
    cpus = len(result.cpus) if result.cpus else run.machine.cores
    calm = [lv for lv in result.levels if lv.level <= max(1, pool.servers)]
    cpu_us = calm[0].cpu_us_per_request if calm and result.sampled else None
    pred = predict_knee(pool, steps, cpu_us_per_request=cpu_us, cores=cpus)
    if pred is None:
        return result
    bp = result.breaking_point
    below = max(
        (lv.level for lv in result.levels if bp is not None and lv.level < bp), default=None
    )
    peak = max((lv.rps for lv in result.levels), default=None)
    miss = knee_miss(pred, broke_at=bp, below=below, peak_rps=peak, rate_mode=rate_mode(run))
    return msgspec.structs.replace(result, knee=pred, knee_miss=miss)


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
    if len(lv.samples) >= 2:  # rounds: the interval of the next run's req/s
        line += f"  [{rounds_interval(lv.samples)}]"
    if lv.little is not None and not lv.little.ok:
        line += f"  [Little: {lv.little.reason}]"
    if lv.engine_limited:
        line += f"  [engine-limited: {lv.engine_limit}]"
    if lv.db_down:
        line += "  [DATABASE FAULT: down, restarted or its tables gone; not judged]"
    return line


def record_paths(core: RaceCore, rec: BenchResults, ids: list[str], s: RaceSettings) -> None:
    """Each of your requests over the whole run, per stack (the target's never-restarted
    per-kind figures; a single request: its totals are the stack's)."""
    kinds = s.request_kinds() or []
    for i in ids:
        t = core.target(i)
        if t is None:
            continue
        if t.kinds_run is not None:
            labels = [kind.label for kind in kinds]
            rec.by_name[i].paths = path_results(labels, t.kinds_run, strict=False)
