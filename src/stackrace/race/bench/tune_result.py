"""A tune's run file: what race/bench/tune_run.py measured, as `bench --json` writes runs, with
the tune's answer beside it.

    run = tune_result(job, state, interrupted=None, shared=[])

- every configuration measured is a stack result, its `capacity` the capacity search's
  answer with every probe (its search's and its rounds', each with its level and the
  machine's noise meanwhile), so `report` and `tune --from` read it;
- `tune` (report/schema.TuneResult): the verdict (a winner with its confidence, a tie
  within noise, or not decided), each point tried with its median and 90 % interval,
  the points never measured, the leader's edges, the placement and what it means for
  a deploy; the deploy line is the command layer's to add (it knows the stacks file);
- `noise`: the machine before and during the probes, the A/A noise, other runs.

An interrupted tune keeps every probe and names no winner: its verdict says it was
interrupted, and which configuration led when it was.
"""

from __future__ import annotations

import msgspec

from stackrace.race.bench.results import new_run
from stackrace.race.bench.tune_run import TuneJob, TuneState
from stackrace.race.bench.tune_search import TuneOutcome
from stackrace.race.core.capacity_plan import result as capacity_result
from stackrace.race.core.capacity_search import CapacitySearch, needed_answers
from stackrace.race.core.noise import summarize
from stackrace.race.core.placement import CorePlacement
from stackrace.report.schema import (
    BenchRun,
    CapacityProbe,
    CapacityResult,
    StackResult,
    TunePoint,
    TuneResult,
)
from stackrace.report.slo import Slo


def placement_sentence(placement: CorePlacement | None, cores: int, urls: bool = False) -> str:
    """Where the configurations ran, and what that means for a deploy on this machine."""
    if placement is None:
        return ""
    if urls:
        engine = ",".join(str(c) for c in placement.engine_cpus or [])
        return "the server you started ran where you started it (stackrace does not place it)" + (
            f", the engine on cpu {engine} (the server may share it)" if engine else ""
        )
    if placement.engine_cpus is None:
        return (
            f"{placement.note}: each configuration had every core of the app host, as a "
            "deploy there would"
        )
    server = placement.stack_cpus[0] if placement.stack_cpus else None
    n = len(server) if server else cores
    return (
        f"server on {n} of {cores} cores, engine on the other{'s' if cores - n > 1 else ''} "
        f"({placement.note}): on this machine a deploy gets all {cores}, so configurations "
        "with more workers may do better there than here"
    )


def _capacity(
    job: TuneJob, search: CapacitySearch | None, probes: list[CapacityProbe]
) -> CapacityResult | None:
    s = job.bench.settings
    slo = Slo.parse(s.slo or "")
    own = [p for p in probes if p.phase != "round"]
    rounds = [p for p in probes if p.phase == "round"]
    if search is None or not search.probes:
        return None
    assert job.bench.capacity is not None
    # the last search's own probes: a configuration searched again (tune_search.py
    # `again`) has the first search's before them, kept as evidence in the run file
    last = own[len(own) - len(search.probes) :]
    c = capacity_result(
        search,
        [p.level for p in last],
        slo,
        s.rate is not None,
        needed_answers(slo.quantile),
        job.bench.capacity,
        [p.noise for p in last],
    )
    return msgspec.structs.replace(c, probes=own[: len(own) - len(last)] + c.probes + rounds)


def tune_result(
    job: TuneJob, state: TuneState, interrupted: str | None, shared: list[str]
) -> BenchRun:
    search = state.search
    out: TuneOutcome = search.outcome()
    run = new_run(job.bench, state.placement.note if state.placement else "", "tune")
    run.settings.isolation = "rotate"
    cores = run.machine.cores
    stacks = []
    for name, m in state.measured.items():
        cand = search.cands.get(name)
        st = StackResult(
            name=name,
            title=m.title,
            family=m.family,
            version=m.version,
            levels=[],
            cpus=m.cpus,
            error=m.error or (cand.starved if cand else "") or None,
            url=job.urls[name].url if name in job.urls else "",
            capacity=_capacity(job, cand.search if cand else None, m.probes),
        )
        stacks.append(st)
    run.stacks = stacks
    points = []
    for name, c in out.candidates.items():
        est = out.estimates.get(name)
        if est is None:
            continue
        unstable = list(c.capacity.unstable) if c.capacity and c.capacity.unstable else None
        points.append(
            TunePoint(
                name=name, phase=c.phase, capacity=round(est.median, 1), lo=round(est.lo, 1),
                hi=round(est.hi, 1), repeats=est.n, unstable=unstable,
            )
        )  # fmt: skip
    points.sort(key=lambda p: -p.capacity)
    verdict, winner, confidence = out.verdict, out.winner, out.ranking.confidence
    if interrupted:
        lead = out.ranking.leader
        led = f"; {lead.name} led with {lead.median:,.0f} req/s" if lead else ""
        verdict = (
            f"interrupted ({interrupted}) after {len(points)} configurations{led}: no winner "
            "is named from an unfinished search"
        )
        winner, confidence = None, None
    run.tune = TuneResult(
        stacks=list(search.space.servers),
        axes={k: dict(v) for k, v in search.space.servers.items()},
        verdict=verdict,
        winner=winner,
        confidence=round(confidence, 4) if confidence is not None else None,
        tied=[] if interrupted else list(out.ranking.tied),
        points=points,
        not_measured=out.not_measured,
        edges=out.edges,
        rounds=out.rounds,
        placement=placement_sentence(state.placement, cores, bool(job.urls)),
        stopped=(interrupted and "interrupted") or out.stopped,
    )
    probes = [p for m in state.measured.values() for p in m.probes]
    run.noise = summarize(
        cores,
        [p.noise for p in probes if p.noise is not None],
        [(p.level.cpu_percent, p.level.cpu_wait_percent) for p in probes],
        before=state.before,
        aa_sigma=out.sigma,
        aa_repeats=out.aa_repeats,
        aa_rounds=out.aa_rounds,
        other_runs=shared,
    )
    run.interrupted = interrupted
    run.notes.extend(f"measured while another stackrace run shared the cores: {o}" for o in shared)
    return run
