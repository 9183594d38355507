"""The capacity search run on real levels: race/core/capacity_search.py's state machine, driven by
the race core for every member at once.

    results = await search_capacity(runner, ids, CapacityPlan("p99<50ms"), progress)

One probe is one round: each member still searching gets the load its own search asks
for (closed loop: connections; open loop, when the settings give a `--rate`: req/s),
every member is warmed and measured at the same time (LevelRunner.probe), and each
level is judged against the SLO with complete accounting (report/slo.py) and recorded
in its member's search. Members searched side by side share the machine as they do in
a race; `bench --isolation rotate` and `tune` search one at a time.

A probe lasts until every member has the answers its percentile needs
(`needed_answers`: p99 rests on 1,000) and at least a second, or the level's
`duration` has passed; a probe that ran out of time first says so (`enough: false` in
the JSON), so a reader can tell a percentile from a guess. The start of the bracket
is the first level given (`--concurrency 4`, `--rate 200`): a search from 1 spends
its first probes where nothing is in doubt.

The same function serves `bench --capacity`, `tune` (one candidate at a time) and the
app's `k` key (race/live/session.py): one search driver, three front ends.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stackrace.race.core.capacity_search import Bounds, CapacitySearch, Probe, needed_answers
from stackrace.race.core.state import StackState
from stackrace.report.schema import CapacityProbe, CapacityResult, Level
from stackrace.report.slo import Slo

if TYPE_CHECKING:
    from stackrace.race.bench.protocol import LevelRunner

# where a search may go when nothing else bounds it
CONCURRENCY_CEILING = 4096
RATE_CEILING = 1_000_000.0
MIN_PROBE_S = 1.0


@dataclass(frozen=True)
class CapacityPlan:
    """What a search looks for and how far it may go."""

    slo: str
    budget_s: float | None = None  # per member: probes' seconds, warm-ups included
    precision: float = 0.05
    confirm: int = 2
    ceiling: float | None = None
    max_probes: int = 40


def bounds_for(start: float, rate_mode: bool, plan: CapacityPlan) -> Bounds:
    ceiling = plan.ceiling or (RATE_CEILING if rate_mode else CONCURRENCY_CEILING)
    return Bounds(
        start=max(1.0, min(start, ceiling)),
        ceiling=ceiling,
        integer=not rate_mode,
        precision=plan.precision,
        confirm=plan.confirm,
        max_probes=plan.max_probes,
        budget_s=plan.budget_s,
    )


def unit(rate_mode: bool) -> str:
    return "req/s" if rate_mode else "c"


OnProbe = Callable[[str, float, str], None]  # member, load, what happened ("" before)


async def search_capacity(
    runner: LevelRunner,
    ids: list[str],
    plan: CapacityPlan,
    progress: Callable[[str], None] = lambda s: None,
    on_probe: OnProbe | None = None,
) -> dict[str, CapacityResult]:
    """Search every member's capacity under the SLO at once; one result per member that
    was measured at least once."""
    s = runner.s
    slo = Slo.parse(plan.slo)
    rate_mode = s.rate is not None
    start = float(s.rate) if s.rate is not None else float(s.concurrency_levels[0])
    needed = needed_answers(slo.quantile)
    min_s = min(MIN_PROBE_S, s.duration)
    searches = {i: CapacitySearch(bounds_for(start, rate_mode, plan)) for i in ids}
    levels: dict[str, list[Level]] = {i: [] for i in ids}
    what = unit(rate_mode)
    while True:
        loads: dict[str, float] = {}
        for i, search in searches.items():
            if search.done or _gone(runner, i):
                continue
            load = search.next_load()
            if load is not None:
                loads[i] = load
        if not loads:
            break
        for i, load in loads.items():
            if on_probe is not None:
                on_probe(i, load, "")
        t0 = time.monotonic()
        got = await runner.probe(loads, needed, min_s, s.duration)
        seconds = time.monotonic() - t0
        for i, load in loads.items():
            lv = got.get(i)
            if lv is None:  # crashed: its search ends where it got to
                progress(f"  {i}: no figures at {_at(load, what)} (the stack stopped)")
                continue
            judged = slo.judge_level(lv)
            probe = Probe(
                load=load,
                meets=judged.meets,
                rps=lv.rps,
                why=judged.why,
                figures=judged.figures(),
                answers=lv.requests,
                enough=lv.requests >= needed,
                seconds=seconds,
            )
            searches[i].record(probe)
            levels[i].append(lv)
            mark = "meets" if judged.meets else f"misses: {judged.why}"
            short = "" if probe.enough else f" (only {lv.requests:,} answers of {needed:,})"
            progress(
                f"  {i:<28} {searches[i].probes[-1].phase:<8} {_at(load, what):>12}  "
                f"{lv.rps:>9,.0f} req/s  {mark}{short}"
            )
            if on_probe is not None:
                on_probe(i, load, "meets" if judged.meets else "misses")
    return {
        i: result(searches[i], levels[i], slo, rate_mode, needed, plan)
        for i in ids
        if searches[i].probes
    }


def _gone(runner: LevelRunner, i: str) -> bool:
    return runner.core.members[i].handle.state in (StackState.CRASHED, StackState.STOPPED)


def _at(load: float, what: str) -> str:
    return f"c={load:g}" if what == "c" else f"{load:,.0f} req/s"


def result(
    search: CapacitySearch,
    levels: list[Level],
    slo: Slo,
    rate_mode: bool,
    needed: int,
    plan: CapacityPlan,
) -> CapacityResult:
    """The search's answer with its evidence, as the run file keeps it."""
    cap = search.result()
    at_cap = [
        lv for p, lv in zip(cap.probes, levels, strict=True) if p.meets and p.load == cap.load
    ]
    cpu = [lv.cpu_us_per_request for lv in at_cap if lv.cpu_us_per_request is not None]
    return CapacityResult(
        slo=slo.text,
        mode="rate" if rate_mode else "concurrency",
        load=cap.load,
        capacity=cap.rps,
        margin=cap.margin,
        breaks_at=cap.breaks_at,
        breaks_why=cap.breaks_why,
        stopped=cap.stopped,
        sentence=cap.sentence(slo.text, unit(rate_mode)),
        needed_answers=needed,
        precision=plan.precision,
        rss=max((lv.memory_after.rss for lv in at_cap), default=0),
        cpu_us_per_request=statistics.median(cpu) if cpu else None,
        probes=[
            CapacityProbe(
                load=p.load,
                meets=p.meets,
                why=p.why,
                phase=p.phase,
                answers=p.answers,
                enough=p.enough,
                seconds=round(p.seconds, 3),
                figures=p.figures,
                level=lv,
            )
            for p, lv in zip(cap.probes, levels, strict=True)
        ],
    )
