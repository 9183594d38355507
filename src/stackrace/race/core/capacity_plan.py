"""What a capacity search looks for, and what it found: the plan (`CapacityPlan`), the
bracket it starts from (`bounds_for`), a journal's probes recorded into a fresh search
(`replay`), and the result built from a search (`result`, `with_rounds`, `interrupted`).

Shared by the two drivers of race/core/capacity_search.py's state machine: bench's and
tune's, which sleep on the wall clock (race/bench/capacity_driver.py), and the app's `k`
key, stepped by the app's 4 Hz poll (race/live/capacity.py). The drivers differ in how
they wait; what a plan means and what a result says is one thing, here.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from stackrace.base.errors import StackraceError
from stackrace.race.core.capacity_search import (
    INTERRUPTED,
    Bounds,
    Capacity,
    CapacitySearch,
    Probe,
)
from stackrace.race.core.noise import probe_flags
from stackrace.report.schema import CapacityProbe, CapacityResult, Level, ProbeNoise, ProbeSlice
from stackrace.report.slo import Slo
from stackrace.rules.confidence import estimate, rounds_interval
from stackrace.rules.steadiness import Slice, unsteady

# where a search may go when nothing else bounds it
CONCURRENCY_CEILING = 4096
RATE_CEILING = 1_000_000.0
# a probe's own seconds are judged too (rules/steadiness.py): two seconds hold both
# halves of a server whose speed changes every second, whatever the phase
MIN_PROBE_S = 2.0
# how long a probe may run to get the answers its percentile needs (p99: 1,000 answers
# take 10 s at 100 req/s); a probe that already misses is not run longer
LONGEST_PROBE_S = 15.0


class ResumeError(StackraceError, ValueError):
    """A journal's probes that this search would not have asked for (another version
    of stackrace, other settings): continuing from them would be a different search."""

    exit_code = 2


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
OnResult = Callable[[str, CapacityProbe], None]  # member, the probe as it ended


def replay(search: CapacitySearch, member: str, probes: list[CapacityProbe], unit_: str) -> None:
    """Record a journal's probes into a fresh search, checking that each is the load the
    search asks for (ResumeError otherwise)."""
    for n, cp in enumerate(probes, 1):
        asked = search.next_load()
        if asked is None or abs(asked - cp.load) > 1e-9 * max(1.0, cp.load):
            wanted = "nothing more" if asked is None else at_load(asked, unit_)
            raise ResumeError(
                f"{member}: probe {n} of the journal is at {at_load(cp.load, unit_)} where this "
                f"search asks for {wanted} (made by another version or other settings)"
            )
        search.record(probe_of(cp))


def unsteady_of(slices: list[ProbeSlice], slo: Slo) -> str:
    """Whether a probe's own intervals disagree beyond a percentile's noise, on the
    SLO's first latency term (rules/steadiness.py); "" without one."""
    term = next((t for t in slo.terms if t.latency and t.op in ("<", "<=")), None)
    if term is None or not slices:
        return ""
    q = term.quantile
    field_ = term.metric if term.metric in ("p50", "p90", "p99", "p999", "max") else None
    if field_ is None and q is not None:
        field_ = "p50" if q <= 0.5 else "p90" if q <= 0.9 else "p99" if q <= 0.99 else "p999"
    if field_ is None:
        return ""
    series = [Slice(s.answers, float(getattr(s, field_)), s.goodput) for s in slices]
    return unsteady(series, term.value, field_)


def probe_of(cp: CapacityProbe) -> Probe:
    busy, starved = probe_flags(cp.noise, cp.level.cpu_percent, cp.level.cpu_wait_percent)
    return Probe(
        load=cp.load,
        meets=cp.meets,
        rps=cp.level.rps,
        why=cp.why,
        figures=dict(cp.figures),
        answers=cp.answers,
        enough=cp.enough,
        seconds=cp.seconds,
        busy=busy,
        starved=starved,
        unsteady=cp.unsteady,
    )


def with_rounds(c: CapacityResult, more: list[CapacityProbe]) -> CapacityResult:
    """A capacity with its later rounds (the search's answer is round 1; a round that
    missed the SLO at the load is 0 req/s): their median, their interval, said."""

    if not more or c.capacity is None:
        return c
    samples = [c.capacity, *(p.level.rps if p.meets else 0.0 for p in more)]
    est = estimate("", samples, None)
    missed = sum(1 for p in more if not p.meets)
    note = f", missed the SLO there in {missed} of {len(samples)} rounds" if missed else ""
    before = c.sentence.split(" (", 1)
    head = before[0]
    tail = before[1].split(")", 1)[1] if len(before) > 1 and ")" in before[1] else ""
    if est.median > 0:
        sentence = f"{head} ({est.median:,.0f} req/s; {rounds_interval(samples)}{note}){tail}"
    else:  # most rounds missed at the search's answer: it did not hold, said so
        sentence = (
            f"{head} in its search, but not across rounds ({rounds_interval(samples)}{note}):"
            f" no capacity that holds{tail}"
        )
    return msgspec.structs.replace(
        c,
        capacity=est.median,
        rounds=[round(x, 1) for x in samples],
        lo=round(est.lo, 1),
        hi=round(est.hi, 1),
        sentence=sentence,
        probes=c.probes + more,
    )


def interrupted(c: CapacityResult) -> CapacityResult:
    """A search that did not end: its probes kept, no capacity claimed."""

    stub = Capacity(
        load=c.load,
        rps=c.capacity,
        margin=c.margin,
        breaks_at=c.breaks_at,
        breaks_why=c.breaks_why,
        stopped=INTERRUPTED,
        probes=[probe_of(p) for p in c.probes],
    )
    what = "req/s" if c.mode == "rate" else "c"
    # the JSON claims no capacity either: `load` stays (the highest load seen meeting the
    # SLO, as the sentence says), the req/s figure at it and its margin go
    return msgspec.structs.replace(
        c,
        stopped=INTERRUPTED,
        sentence=stub.sentence(c.slo, what),
        unstable=None,
        capacity=None,
        margin=None,
        rss=0,
        cpu_us_per_request=None,
    )


def at_load(load: float, what: str) -> str:
    return f"c={load:g}" if what == "c" else f"{load:,.0f} req/s"


def found(
    cap: Capacity,
    slo: Slo,
    rate_mode: bool,
    needed: int,
    plan: CapacityPlan,
    *,
    stopped: str,
    rss: int,
    cpu: list[float],
    probes: list[CapacityProbe] | None = None,
    unstable: list[float] | None = None,
    thin: bool = False,
) -> CapacityResult:
    """What a search found, as every driver keeps it: the search's answer, the memory
    (`rss`) and the median CPU per answer (`cpu`) at its capacity. Bench and tune add
    each probe with its evidence (`result`); the app's `k` keeps the figures only
    (race/live/capacity.py). One builder, so the two cannot say a capacity differently."""
    return CapacityResult(
        slo=slo.text,
        mode="rate" if rate_mode else "concurrency",
        load=cap.load,
        capacity=cap.rps,
        margin=cap.margin,
        breaks_at=cap.breaks_at,
        breaks_why=cap.breaks_why,
        stopped=stopped,
        sentence=cap.sentence(slo.text, unit(rate_mode)),
        needed_answers=needed,
        precision=plan.precision,
        rss=rss,
        cpu_us_per_request=statistics.median(cpu) if cpu else None,
        probes=probes if probes is not None else [],
        unstable=unstable,
        thin=thin,
        starved_break=cap.starved_break,
    )


def result(
    search: CapacitySearch,
    levels: list[Level],
    slo: Slo,
    rate_mode: bool,
    needed: int,
    plan: CapacityPlan,
    noises: list[ProbeNoise | None] | None = None,
    series: list[list[ProbeSlice]] | None = None,
) -> CapacityResult:
    """The search's answer with its evidence, as the run file keeps it."""
    cap = search.result()
    felt = noises if noises is not None else [None] * len(levels)
    own = series if series is not None else [[] for _ in levels]
    at_cap = [
        lv for p, lv in zip(cap.probes, levels, strict=True) if p.meets and p.load == cap.load
    ]
    cpu = [lv.cpu_us_per_request for lv in at_cap if lv.cpu_us_per_request is not None]
    return found(
        cap,
        slo,
        rate_mode,
        needed,
        plan,
        stopped=cap.stopped,
        rss=max((lv.memory_after.rss for lv in at_cap), default=0),
        cpu=cpu,
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
                noise=n,
                slices=sl,
                unsteady=p.unsteady,
            )
            for p, lv, n, sl in zip(cap.probes, levels, felt, own, strict=True)
        ],
        unstable=list(cap.unstable) if cap.unstable is not None else None,
        thin=cap.thin,
    )
