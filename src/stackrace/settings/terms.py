"""Threshold terms, parsed: `p99<50ms`, `failures<0.1%`, `qps<-10%` (METRIC OP VALUE).

The one parser of every option that holds figures to a threshold: `--fail-on` (the
gate: report/gate.py) and `--slo` (a service-level objective: report/slo.py). It sits
low in the layers, beside the other small parsers, because the race settings
(settings/race_settings.py) must check a `--slo` the moment it is given, on the command line or
in a preset, and they may not reach up into report/. Reading a term on a level's
figures is report/'s business (thresholds.py, slo.py).

Metrics: qps (answered req/s; `rps` is the same), any latency percentile (`p50`, `p95`,
`p99`, `p999` = `p99.9`, `p9999`…), `max`, `mean`, `failures` (a share of attempts),
`waiting` (a share of the requests in play still waiting at the end), `rss` (memory),
`cpu` (percent of one core).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from stackrace.base.errors import StackraceError

# the latencies every summary carries (engine/model.py LatencySummary); another
# percentile is read from the level's histogram
SUMMARY_LATENCIES = frozenset({"p50", "p90", "p99", "p999", "max", "mean"})
SHARES = frozenset({"failures", "waiting"})

_TERM = re.compile(
    r"^\s*(qps|rps|p\d+(?:\.\d+)?|max|mean|failures|waiting|rss|cpu)\s*(<=|>=|<|>)\s*"
    r"([+-]?)\s*([\d.]+(?:e[+-]?\d+)?)\s*(%|ms|us|µs|s|kib|mib|gib|kb|mb|gb)?\s*$",
    re.IGNORECASE,
)
US_PER = {"us": 1.0, "µs": 1.0, "ms": 1000.0, "s": 1_000_000.0}
_BYTES_PER = {
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
}


class TermError(StackraceError, ValueError):
    """A term that cannot be read; str() names the option and the term."""


@dataclass(frozen=True)
class Term:
    """One threshold. `value`: a fraction for relative terms and for shares (failures,
    waiting); µs for a latency; bytes for rss; percent of one core for cpu; req/s for
    qps."""

    metric: str  # canonical: "p999" for p99.9, "qps" for rps
    op: str  # "<", ">", "<=" or ">="
    relative: bool
    value: float
    text: str  # as written, for messages

    @property
    def quantile(self) -> float | None:
        """The percentile a latency term reads (p99: 0.99); None for anything else."""
        return quantile_of(self.metric)

    @property
    def latency(self) -> bool:
        return is_latency(self.metric)


def quantile_of(metric: str) -> float | None:
    """p99 → 0.99, p999 → 0.999, p50 → 0.5, p75 → 0.75; None: not a percentile."""
    if not re.fullmatch(r"p\d+", metric):
        return None
    digits = metric[1:]
    return round(float(f"{digits[:2]}.{digits[2:] or 0}") / 100, 12)


def is_latency(metric: str) -> bool:
    return metric in ("max", "mean") or quantile_of(metric) is not None


def _canonical(metric: str, option: str, shown: str) -> str:
    metric = metric.lower()
    if metric == "rps":
        return "qps"
    if not metric.startswith("p"):
        return metric
    whole, _, frac = metric[1:].partition(".")
    if len(whole) > 2 and frac:
        raise TermError(f"bad {option} rule {shown!r}: write p99.9 or p999, not both")
    if frac:
        whole = whole.zfill(2) + frac.rstrip("0")
    if len(whole) == 1:
        whole = "0" + whole
    q = quantile_of("p" + whole)
    if q is None or not 0 < q < 1 or whole.startswith("100"):
        raise TermError(
            f"bad {option} rule {shown!r}: a percentile lies between p0 and p100 (use max)"
        )
    return "p" + whole.rstrip("0") if len(whole) > 2 else "p" + whole


def parse_terms(spec: str, option: str = "--fail-on") -> list[Term]:
    """The terms of a comma-separated spec; TermError on the first bad one."""
    return [parse_term(part, option) for part in spec.split(",") if part.strip()]


def parse_term(text: str, option: str = "--fail-on") -> Term:
    shown = text.strip()
    m = _TERM.match(text)
    if not m:
        raise TermError(
            f"bad {option} rule {shown!r}: use METRIC>VALUE or METRIC<CHANGE%, "
            "e.g. p99>50ms, failures>0.1%, qps<-10%, p99>+25%"
        )
    raw, op, sign, number, unit = m.groups()
    metric = _canonical(raw, option, shown)
    unit = unit.lower() if unit else None
    try:
        value = float(number)
    except ValueError:
        raise TermError(f"bad {option} rule {shown!r}: {number!r} is not a number") from None
    if not math.isfinite(value):
        raise TermError(f"bad {option} rule {shown!r}: the value must be a finite number")
    if sign:  # a change from a baseline
        if unit != "%":
            raise TermError(f"{option} rule {shown!r}: a relative change is given in %")
        return Term(metric, op, True, value / 100 * (-1 if sign == "-" else 1), shown)
    allowed = _units(metric)
    if unit not in allowed:
        names = ", ".join(sorted(u or "a bare number" for u in allowed))
        raise TermError(f"{option} rule {shown!r}: {metric} takes {names}")
    if metric in SHARES:
        value /= 100
    elif unit in US_PER:
        value *= US_PER[unit]
    elif unit in _BYTES_PER:
        value *= _BYTES_PER[unit]
    return Term(metric, op, False, value, shown)


def _units(metric: str) -> set[str | None]:
    """Which units a metric takes (None: a bare number; a bare latency is in µs)."""
    if is_latency(metric):
        return {None, *US_PER}
    if metric in SHARES:
        return {"%"}
    if metric == "rss":
        return {None, *_BYTES_PER}
    if metric == "cpu":
        return {None, "%"}
    return {None}  # qps


def compare(value: float, op: str, threshold: float) -> bool:
    """Whether `value OP threshold` holds."""
    if op == "<":
        return value < threshold
    if op == ">":
        return value > threshold
    if op == "<=":
        return value <= threshold
    return value >= threshold


def check_objective(spec: str, option: str = "--slo") -> list[Term]:
    """The terms of an objective (`--slo`): at least one, every one absolute (an
    objective says what must hold; a change from a baseline is --fail-on's).
    TermError names the option and the bad term."""
    terms = parse_terms(spec, option)
    if not terms:
        raise TermError(f"{option}: no rule given (e.g. 'p99<50ms,failures<0.1%')")
    for t in terms:
        if t.relative:
            raise TermError(
                f"{option} rule {t.text!r}: an objective is absolute (p99<50ms, "
                "failures<0.1%); a change from a baseline is --fail-on's"
            )
    return terms
