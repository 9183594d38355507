"""Thresholds on a level's figures: one term parser and one evaluator over a level.

    terms = parse_terms("p99>50ms,failures>0.1%", "--fail-on")
    reading = evaluate(level, terms[0])   # Reading: the value, and whether the term holds

A term is METRIC OP VALUE: `p99>50ms`, `failures>0.1%`, `qps<5000`, `rss>200MiB`… An
absolute term compares the level's own figure; a relative one (a sign and a
percentage: `qps<-10%`, `p99>+25%`) compares its change from a baseline level, which only
the gate has (report/gate.py). Metrics: qps (answered req/s), p50, p90, p99, p999, max
(latency), failures (the failure rate: failed or stale among attempts), rss (memory
after the level, bytes), cpu (percent of one core).

Every option that holds a run to figures reads its terms here and judges them here:
`--fail-on` says when a run fails (a term that *holds* is a failure), a service-level
objective (`--slo 'p99<50ms,failures<0.1%'`) would say what must hold (a term that does
*not* hold is a miss). Both are the same parse and the same comparison read two ways, so
`evaluate` answers only "does VALUE OP THRESHOLD hold", and the caller decides what that
means.

A latency of a level that got no answer is unknown, not 0 µs: `evaluate` says so
(`holds` is None), and neither reading may pass on it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from stackrace.report.schema import Level
from stackrace.units import fmt_us

METRICS = ("qps", "p50", "p90", "p99", "p999", "max", "failures", "rss", "cpu")
LATENCIES = frozenset({"p50", "p90", "p99", "p999", "max"})

_TERM = re.compile(
    r"^\s*(qps|rps|p50|p90|p99|p999|max|failures|rss|cpu)\s*(<=|>=|<|>)\s*"
    r"([+-]?)\s*([\d.]+(?:e[+-]?\d+)?)\s*(%|ms|us|µs|s|kib|mib|gib|kb|mb|gb)?\s*$",
    re.IGNORECASE,
)
_US_PER = {"us": 1.0, "µs": 1.0, "ms": 1000.0, "s": 1_000_000.0}
_BYTES_PER = {
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
}
# which units each metric takes (None: a bare number)
_UNITS: dict[str, set[str | None]] = {
    **{m: {None, *_US_PER} for m in LATENCIES},  # a bare latency is in µs
    "qps": {None},
    "failures": {"%"},
    "rss": {None, *_BYTES_PER},
    "cpu": {None, "%"},
}


@dataclass(frozen=True)
class Term:
    """One threshold. `value`: a fraction for relative terms and for failures; µs for a
    latency; bytes for rss; percent of one core for cpu; req/s for qps."""

    metric: str
    op: str  # "<", ">", "<=" or ">="
    relative: bool
    value: float
    text: str  # as written, for messages


class TermError(ValueError):
    """A term that cannot be read; str() names the option and the term."""


def parse_terms(spec: str, option: str = "--fail-on") -> list[Term]:
    """The terms of a comma-separated spec; TermError on the first bad one."""
    terms = []
    for part in spec.split(","):
        if part.strip():
            terms.append(parse_term(part, option))
    return terms


def parse_term(text: str, option: str = "--fail-on") -> Term:
    shown = text.strip()
    m = _TERM.match(text)
    if not m:
        raise TermError(
            f"bad {option} rule {shown!r}: use METRIC>VALUE or METRIC<CHANGE%, "
            "e.g. p99>50ms, failures>0.1%, qps<-10%, p99>+25%"
        )
    metric, op, sign, number, unit = m.groups()
    metric = "qps" if metric.lower() == "rps" else metric.lower()
    unit = unit.lower() if unit else None
    value = float(number)
    if not math.isfinite(value):
        raise TermError(f"bad {option} rule {shown!r}: the value must be a finite number")
    if sign:  # a change from a baseline
        if unit != "%":
            raise TermError(f"{option} rule {shown!r}: a relative change is given in %")
        return Term(metric, op, True, value / 100 * (-1 if sign == "-" else 1), shown)
    if unit not in _UNITS[metric]:
        allowed = ", ".join(sorted(u or "a bare number" for u in _UNITS[metric]))
        raise TermError(f"{option} rule {shown!r}: {metric} takes {allowed}")
    if metric == "failures":
        value /= 100
    elif unit in _US_PER:
        value *= _US_PER[unit]
    elif unit in _BYTES_PER:
        value *= _BYTES_PER[unit]
    return Term(metric, op, False, value, shown)


def value_of(level: Level, metric: str) -> float | None:
    """The level's figure for `metric`; None for a latency when nothing was answered
    (no answer has no latency, and 0 µs would read as an instant one)."""
    if metric == "qps":
        return level.rps
    if metric == "failures":
        return level.failure_rate
    if metric == "rss":
        return float(level.memory_after.rss)
    if metric == "cpu":
        return level.cpu_percent
    if level.window.requests == 0:
        return None
    return float(getattr(level.latency, metric))


def compare(value: float, op: str, threshold: float) -> bool:
    """Whether `value OP threshold` holds."""
    if op == "<":
        return value < threshold
    if op == ">":
        return value > threshold
    if op == "<=":
        return value <= threshold
    return value >= threshold


@dataclass(frozen=True)
class Reading:
    """A term read on one level: the value, and whether the term holds (None: the
    value is unknown, as the latency of a level that got no answer)."""

    term: Term
    value: float | None
    holds: bool | None

    def shown(self) -> str:
        """'p99 61.2ms (rule p99>50ms)'."""
        return f"{self.term.metric} {fmt(self.term.metric, self.value)} (rule {self.term.text})"


def evaluate(level: Level, term: Term) -> Reading:
    """Read an absolute term on a level (a relative one needs a baseline: the gate)."""
    if term.relative:
        raise ValueError(f"{term.text} is relative: it needs a baseline")
    value = value_of(level, term.metric)
    holds = None if value is None else compare(value, term.op, term.value)
    return Reading(term, value, holds)


def fmt(metric: str, v: float | None) -> str:
    """A figure as the reports show it."""
    if v is None:
        return "unknown (no answers)"
    if metric in LATENCIES:
        return fmt_us(v)
    if metric == "failures":
        return f"{v * 100:.2f}%"
    if metric == "qps":
        return f"{v:,.0f} req/s"
    if metric == "rss":
        return f"{v / 1048576:.1f} MiB"
    return f"{v:.1f}%"
