"""The capacity search run on real levels: race/core/capacity_search.py's state machine, driven by
bench and tune on the race core for every member at once (what a plan and a result are:
race/core/capacity_plan.py).

    results = await search_capacity(runner, ids, CapacityPlan("p99<50ms"), progress)

One probe is one round: each member still searching gets the load its own search asks
for (closed loop: connections; open loop, when the settings give a `--rate`: req/s),
every member is warmed and measured at the same time (LevelRunner.probe), and each
level is judged against the SLO with complete accounting (report/slo.py) and recorded
in its member's search. Members searched side by side share the machine as they do in
a race; `bench --isolation rotate` and `tune` search one at a time.

A probe lasts until every member has the answers its percentile needs
(`needed_answers`: p99 rests on 1,000) and at least a second, or the level's
`duration` has passed; a member still short of its answers that has not missed yet
keeps the probe going, up to `LONGEST_PROBE_S`: a pass on 180 answers of the 1,000 a
p99 needs is a guess. A probe that ran out of time even so says so (`enough: false`
in the JSON, and the capacity that rests on it is marked thin, race/core/capacity_search.py), so a
reader can tell a percentile from a guess. The start of the bracket is the first level
given (`--concurrency 4`, `--rate 200`): a search from 1 spends its first probes where
nothing is in doubt.

Nothing measured is lost: each probe goes to `on_result` as it ends (bench journals
it, race/core/journal.py), the caller's `into` holds every member's result so far after
each probe (an interrupted search keeps its probes, marked INTERRUPTED, never a
capacity), and `prior` records a journal's probes into the searches before the first
new one, so a resumed search goes on where it stopped (the search is deterministic:
the same probes lead it through the same states). Each probe carries how busy the
machine was meanwhile (race/core/noise.py) when a `NoiseMeter` is given.

The same function serves `bench --capacity`, `tune` (one candidate at a time) and the
app's `k` key (race/live/session.py): one search driver, three front ends.

A search is one round: its confirming probes come seconds apart, in one minute of the
machine, and say nothing of the next run (the sentence says "one round: no interval").
`bench --capacity --repeat N` adds rounds 2 … N (`capacity_rounds`): every group of
stacks is started afresh and probed again at the load its search answered, the groups
in an order shuffled each round (A B C, then C A B), so that a round is minutes from
the one before and the machine's drift between them is in their spread; the capacity is
then the rounds' median with the interval rules/confidence.estimate gives (as `tune`'s).
A fresh start rather than only a fresh warm-up: the groups are stopped between their
turns anyway (rotating isolation puts one on the cores at a time), and a start is a few
seconds beside a search of a minute. A round that misses the SLO at that load counts as
0 req/s: the next run may not hold it either, and the interval says so.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from stackrace.race.core.capacity_plan import (
    LONGEST_PROBE_S,
    MIN_PROBE_S,
    CapacityPlan,
    OnProbe,
    OnResult,
    at_load,
    bounds_for,
    replay,
    result,
    unit,
    unsteady_of,
    with_rounds,
)
from stackrace.race.core.capacity_search import (
    CapacitySearch,
    Probe,
    needed_answers,
)
from stackrace.race.core.noise import NoiseMeter, probe_busy
from stackrace.race.core.state import StackState
from stackrace.report.schema import CapacityProbe, CapacityResult, Level, ProbeNoise, ProbeSlice
from stackrace.report.slo import Slo

if TYPE_CHECKING:
    from stackrace.race.bench.protocol import LevelRunner


async def search_capacity(
    runner: LevelRunner,
    ids: list[str],
    plan: CapacityPlan,
    progress: Callable[[str], None] = lambda s: None,
    on_probe: OnProbe | None = None,
    on_result: OnResult | None = None,
    into: dict[str, CapacityResult] | None = None,
    prior: dict[str, list[CapacityProbe]] | None = None,
    noise: NoiseMeter | None = None,
) -> dict[str, CapacityResult]:
    """Search every member's capacity under the SLO at once; one result per member that
    was measured at least once (`into` holds them after every probe)."""
    s = runner.s
    slo = Slo.parse(plan.slo)
    rate_mode = s.rate is not None
    start = float(s.rate) if s.rate is not None else float(s.concurrency_levels[0])
    needed = needed_answers(slo.quantile)
    min_s = min(MIN_PROBE_S, s.duration)
    searches = {i: CapacitySearch(bounds_for(start, rate_mode, plan)) for i in ids}
    levels: dict[str, list[Level]] = {i: [] for i in ids}
    noises: dict[str, list[ProbeNoise | None]] = {i: [] for i in ids}
    series: dict[str, list[list[ProbeSlice]]] = {i: [] for i in ids}
    what = unit(rate_mode)
    out = into if into is not None else {}
    for i, probes in (prior or {}).items():
        if i not in searches:
            continue
        replay(searches[i], i, probes, what)
        searches[i].next_load()
        levels[i] = [cp.level for cp in probes]
        noises[i] = [cp.noise for cp in probes]
        series[i] = [cp.slices for cp in probes]
        out[i] = result(searches[i], levels[i], slo, rate_mode, needed, plan, noises[i], series[i])

    def undecided(i: str) -> bool:
        t = runner.core.target(i)
        return t is not None and slo.judge_window(t.total).meets

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
        mark = noise.mark(_engine_pids(runner, list(loads))) if noise is not None else None
        got = await runner.probe(loads, needed, min_s, s.duration, LONGEST_PROBE_S, undecided)
        seconds = time.monotonic() - t0
        felt = noise.since(mark) if noise is not None and mark is not None else None
        await _evidence_at_boundary(runner, got, slo, loads)
        for i, load in loads.items():
            lv = got.get(i)
            if lv is None:  # crashed: its search ends where it got to
                progress(f"  {i}: no figures at {at_load(load, what)} (the stack stopped)")
                continue
            judged = slo.judge_level(lv)
            slices = runner.last_slices.get(i, [])
            probe = Probe(
                load=load,
                meets=judged.meets,
                rps=lv.rps,
                why=judged.why,
                figures=judged.figures(),
                answers=lv.requests,
                enough=lv.requests >= needed,
                seconds=seconds,
                busy=probe_busy(felt, lv.cpu_wait_percent),
                unsteady=unsteady_of(slices, slo),
            )
            searches[i].record(probe)
            searches[i].next_load()  # asked now (it will be again): an ended search says so
            levels[i].append(lv)
            noises[i].append(felt)
            series[i].append(slices)
            out[i] = result(
                searches[i], levels[i], slo, rate_mode, needed, plan, noises[i], series[i]
            )
            if on_result is not None:
                on_result(i, out[i].probes[-1])
            mark_ = "meets" if judged.meets else f"misses: {judged.why}"
            short = "" if probe.enough else f" (only {lv.requests:,} answers of {needed:,})"
            progress(
                f"  {i:<28} {searches[i].probes[-1].phase:<8} {at_load(load, what):>12}  "
                f"{lv.rps:>9,.0f} req/s  {mark_}{short}"
            )
            if on_probe is not None:
                on_probe(i, load, "meets" if judged.meets else "misses")
    return {i: out[i] for i in ids if i in out}


async def capacity_rounds(
    runner: LevelRunner,
    plan: CapacityPlan,
    groups: list[list[str]],
    found: dict[str, CapacityResult],
    seed: int,
    start: Callable[[list[str]], Awaitable[list[str]]],
    stop: Callable[[list[str]], Awaitable[None]],
    progress: Callable[[str], None] = lambda s: None,
    noise: NoiseMeter | None = None,
) -> None:
    """Rounds 2 … `repeat` of the capacities `found` (module docstring): each round, the
    groups in a shuffled order (from `seed`), each started afresh (`start` gives the
    members ready), probed at their answers' loads at once, stopped (`stop`). `found`
    then holds each capacity with its rounds and interval."""
    s = runner.s
    slo = Slo.parse(plan.slo)
    needed = needed_answers(slo.quantile)
    what = unit(s.rate is not None)
    rng = random.Random(seed)
    todo = [[i for i in g if i in found and found[i].claimed] for g in groups]
    todo = [g for g in todo if g]
    more: dict[str, list[CapacityProbe]] = {i: [] for g in todo for i in g}
    for r in range(2, s.repeat + 1):
        rng.shuffle(todo)
        progress(f"capacity round {r} of {s.repeat}: " + " | ".join(", ".join(g) for g in todo))
        for group in todo:
            live = await start(group)
            loads = {i: load for i in live if (load := found[i].load) is not None}
            if loads:
                mark = noise.mark(_engine_pids(runner, list(loads))) if noise else None
                t0 = time.monotonic()
                got = await runner.probe(loads, needed, min(MIN_PROBE_S, s.duration), s.duration)
                felt = noise.since(mark) if noise is not None and mark is not None else None
                for i, load in loads.items():
                    lv = got.get(i)
                    if lv is None:
                        continue
                    judged = slo.judge_level(lv)
                    more[i].append(
                        CapacityProbe(
                            load=load, meets=judged.meets, why=judged.why, phase="round",
                            answers=lv.requests, enough=lv.requests >= needed,
                            seconds=round(time.monotonic() - t0, 3), figures=judged.figures(),
                            level=lv, noise=felt, slices=runner.last_slices.get(i, []),
                        )
                    )  # fmt: skip
                    said = "meets" if judged.meets else f"misses: {judged.why}"
                    progress(
                        f"  {i:<28} round {r:<3} {at_load(load, what):>12}  {lv.rps:>9,.0f} req/s  "
                        + said
                    )
            await stop(group)
    for i, probes in more.items():
        found[i] = with_rounds(found[i], probes)


async def _evidence_at_boundary(
    runner: LevelRunner, got: dict[str, Level], slo: Slo, loads: dict[str, float]
) -> None:
    """A member's first probe that misses the SLO is its boundary: one evidence window
    there (race/core/evidence_keeper.py), captured with the probe's load still on, goes
    with the probe's level (`Level.why`), so the capacity line can say why."""
    keeper = runner.core.evidence
    started = []
    for i, load in loads.items():
        lv, m = got.get(i), runner.core.members.get(i)
        if lv is None or m is None or slo.judge_level(lv).meets or keeper.latest(i):
            continue
        if keeper.want(m, round(load)):
            started.append((i, lv, round(load)))
    if not started:
        return
    await keeper.settle(timeout=keeper.seconds + 20)
    for i, lv, level in started:
        lv.why = keeper.at(i, level)


def _engine_pids(runner: LevelRunner, ids: list[str]) -> list[int]:
    return [pid for i in ids for pid in runner.core.engine.engine_pids(i)]


def _gone(runner: LevelRunner, i: str) -> bool:
    return runner.core.members[i].handle.state in (StackState.CRASHED, StackState.STOPPED)
