"""Whether one probe's own seconds agree: a server whose speed depends on the wall clock,
not on the load, is unstable whatever its neighbours say.

    why = unsteady(slices, bound_us=50_000, name="p99")    # "" steady, else the proof

A capacity probe is judged on its totals: one p99 over every answer of the probe. A
server fast in even seconds and 80 ms slower in odd ones meets a p99 of 50 ms over a
whole probe in a closed loop (its slow seconds answer a hundred times fewer requests,
under 1 % of the answers), so a search found "meets up to c=10 (19,215 req/s ± 18
%), breaks at c=11" for it: a clean boundary for a server that has none. Its neighbours
only sometimes disagree (a probe's totals mostly hide the slow seconds), so a search
that weighs only misses below passes catches it only sometimes.

What catches it every time is the probe's own time series. The engine reports every
interval (a quarter second in bench and tune); each interval's percentile is compared
with the SLO's bound:

- **slow**: past `SEPARATION` × the bound (clearly missing, not near it);
- **fast**: at or under the bound.

A probe is unsteady when at least `MIN_EACH` of its intervals are slow and as many
fast, each at least `MIN_SHARE` of those judged (intervals with `MIN_ANSWERS` answers
or more): its time both meets and clearly misses, in parts of the probe, not in one
stray interval. A p99 near the bound scatters across it by a few percent, never past
`SEPARATION` × it in a quarter of the probe. A stall of a shared core (40-130 ms, one
or two intervals) can make two slow intervals in a short probe: that is why the search
measures such a probe again when the machine was busy (race/core/capacity_search.py),
as it does a busy miss, and only a repeat that is unsteady too counts.

Pure: no I/O, no clock; unit-tested on constructed series and through the capacity
search's seeded model (tests/unit/test_capacity_search.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

SEPARATION = 1.25  # a slow interval's percentile is past this many times the bound
MIN_EACH = 2  # slow and fast intervals needed, each
MIN_SHARE = 0.25  # ... and each this share of the intervals judged
MIN_ANSWERS = 3  # an interval with fewer answers says nothing of a percentile
PROOF = "its own intervals disagree"  # how every proof begins


@dataclass(frozen=True)
class Slice:
    """One interval of a probe: its answers, its percentile (µs), its goodput."""

    answers: int
    p_us: float
    goodput: float = 0.0


def unsteady(slices: Sequence[Slice], bound_us: float | None, name: str = "p99") -> str:
    """The proof that the probe's intervals disagree beyond a percentile's noise ("" when
    they do not, or when there is no latency bound to weigh them against)."""
    if bound_us is None or bound_us <= 0:
        return ""
    judged = [s for s in slices if s.answers >= MIN_ANSWERS]
    slow = [s for s in judged if s.p_us > SEPARATION * bound_us]
    fast = [s for s in judged if s.p_us <= bound_us]
    need = max(MIN_EACH, MIN_SHARE * len(judged))
    if len(slow) < need or len(fast) < need:
        return ""
    slow_p = sorted(s.p_us for s in slow)[len(slow) // 2]
    fast_p = sorted(s.p_us for s in fast)[len(fast) // 2]
    return (
        f"{PROOF}: {len(slow)} of {len(judged)} had {name} "
        f"~{_ms(slow_p)}, {len(fast)} ~{_ms(fast_p)} (bound {_ms(bound_us)})"
    )


def _ms(us: float) -> str:
    return f"{us / 1000:.0f} ms" if us >= 10_000 else f"{us / 1000:.1f} ms"
