"""Thresholds on a level's figures: one term parser and one evaluator over a level.

    terms = parse_terms("p99>50ms,failures>0.1%", "--fail-on")
    reading = evaluate(level, terms[0])   # Reading: the value, and whether the term holds

A term is METRIC OP VALUE: `p99>50ms`, `failures>0.1%`, `qps<5000`, `rss>200MiB`… An
absolute term compares the level's own figure; a relative one (a sign and a
percentage: `qps<-10%`, `p99>+25%`) compares its change from a baseline level, which only
the gate has (report/gate.py). Metrics: qps (answered req/s), p50, p90, p99, p999, max
(latency; any percentile, p95 or p99.9, from the level's histogram), mean, failures
(the failure rate: failed or stale among attempts), waiting (a share of the requests in
play), rss (memory after the level, bytes), cpu (percent of one core). The parser itself
is stackrace.settings.terms (low in the layers: the race settings check a --slo with it).

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

from dataclasses import dataclass

from stackrace.engine.histogram import LatencyHistogram
from stackrace.report.schema import Level
from stackrace.settings.terms import (
    SUMMARY_LATENCIES,
    Term,
    TermError,
    compare,
    is_latency,
    parse_term,
    parse_terms,
    quantile_of,
    require_terms,
)
from stackrace.settings.units import fmt_us

__all__ = [
    "Term",
    "TermError",
    "compare",
    "evaluate",
    "fmt",
    "parse_term",
    "parse_terms",
    "require_terms",
]


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
    if metric == "waiting":
        w = level.window
        return w.waiting / w.sent if w.sent else 0.0
    if level.window.requests == 0:
        return None
    if metric in SUMMARY_LATENCIES:
        return float(getattr(level.latency, metric))
    q = quantile_of(metric)  # another percentile: from the level's histogram
    if q is None or not level.hdr:
        return None
    return float(LatencyHistogram.decode(level.hdr).value_at_percentile(q * 100))


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
    if is_latency(metric):
        return fmt_us(v)
    if metric in ("failures", "waiting"):
        return f"{v * 100:.2f}%"
    if metric == "qps":
        return f"{v:,.0f} req/s"
    if metric == "rss":
        return f"{v / 1048576:.1f} MiB"
    return f"{v:.1f}%"
