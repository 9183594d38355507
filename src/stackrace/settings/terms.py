"""Threshold terms, parsed: `p99<50ms`, `failures<0.1%`, `qps<-10%` (METRIC OP VALUE).

The one parser of every option that holds figures to a threshold: `--fail-on` (the
gate: report/gate.py) and `--slo` (a service-level objective: report/slo.py). It sits
low in the layers, beside the other small parsers, because the race settings
(settings/race_settings.py) must check a `--slo` the moment it is given, on the command line or
in a preset, and they may not reach up into report/. Reading a term on a level's
figures is report/'s business (thresholds.py, slo.py).

Metrics: qps (answered req/s; `rps` is the same), a latency percentile from p0 to p100
with at most two decimals (`p50`, `p95`, `p10.5`, `p99.9`; the short forms `p999` and
`p9999` are p99.9 and p99.99; p100 is `max`), `max`, `mean`, `failures` (a share of
attempts), `waiting` (a share of the requests in play still waiting at the end), `rss`
(memory), `cpu` (percent of one core). Anything else is refused, never read another
way: `p101` is neither p10.1 nor p101 (write p10.1). A figure with a unit is written
with it: `p99<5` (5 µs? 5 ms?) is refused with the units it takes, as are `rss<200`
and `cpu<80`; only qps is a bare number. A value must be finite once its
unit is applied (`1e308s` is not a latency), a share lies between 0 and 100 %, a
latency within an hour (the longest timeout).

An objective (`--slo`, `check_objective`) says what must stay below a target: only `<`
and `<=`, absolute values, no `qps` (the highest load that meets an objective is what
`--capacity` finds), one target per figure (`p99<5ms,p99<10ms` says two things of one
figure: which one was meant?), and a target of 0 that can never be met (`p99<=0ms`,
`failures<0%`) is refused. Its errors show its own syntax, not --fail-on's. `rss` and
`cpu` are figures of a server's processes (`PROCESS_METRICS`): a command that samples
none (`load`, `bench --url` without --pid) refuses them (`unsampled_terms`).
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

    exit_code = 2  # input that cannot be used: refused before anything starts


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
    """p99 → 0.99, p999 → 0.999, p9999 → 0.9999, p10.5 → 0.105, p0 → 0; None: not a
    percentile (max, mean, qps…, and any name `_canonical` would not give)."""
    m = _PERCENTILE.fullmatch(metric)
    if m:
        return round(float(metric[1:]) / 100, 12)
    m = _SHORT_TAIL.fullmatch(metric)
    if m:
        return round((99 + float("0." + m.group(1))) / 100, 12)
    return None


def is_latency(metric: str) -> bool:
    return metric in ("max", "mean") or quantile_of(metric) is not None


# the canonical names of percentiles: p0–p99 with at most two decimals (p10.5), and the
# tail's short forms p999 / p9999 / p995 (= p99.9, p99.99, p99.5)
_PERCENTILE = re.compile(r"p(?:\d|[1-9]\d)(?:\.\d{1,2})?")
_SHORT_TAIL = re.compile(r"p99(\d{1,2})")
MAX_LATENCY_US = 3600 * 1_000_000.0  # a latency target within the longest timeout (1 h)


def _canonical(metric: str, option: str, shown: str) -> str:
    metric = metric.lower()
    if metric == "rps":
        return "qps"
    if not metric.startswith("p"):
        return metric
    whole, dot, frac = metric[1:].partition(".")
    bad = TermError(
        f"bad {option} rule {shown!r}: a percentile is p0 to p100 with at most two decimals "
        "(p50, p99, p99.9, p10.5; p999 and p9999 are p99.9 and p99.99)"
    )
    if dot:
        digits = frac.rstrip("0")
        if len(whole) > 3 or len(digits) > 2:
            raise bad
        value = float(f"{whole}.{frac}")
    elif len(whole) <= 3 and int(whole) <= 100 and (len(whole) < 3 or whole == "100"):
        value = float(whole)
    elif len(whole) in (3, 4) and whole.startswith("99"):
        value = 99 + float("0." + whole[2:])  # p999, p9999, p995
    else:
        raise bad
    if not 0 <= value <= 100:
        raise bad
    if value == 100:
        return "max"
    if value.is_integer():
        return f"p{int(value)}"
    if value > 99:
        return "p99" + f"{value:.2f}"[3:].rstrip("0")  # p99.9 → p999, as the summaries
    return "p" + f"{value:.2f}".rstrip("0")


# how each option's terms are written, for its errors
GATE_USAGE = "use METRIC>VALUE or METRIC<CHANGE%, e.g. p99>50ms, failures>0.1%, qps<-10%, p99>+25%"
OBJECTIVE_USAGE = "use METRIC<TARGET, e.g. p99<50ms, p99.9<200ms, mean<20ms, failures<0.1%"


def parse_terms(spec: str, option: str = "--fail-on", usage: str = GATE_USAGE) -> list[Term]:
    """The terms of a comma-separated spec; TermError on the first bad one. An empty
    spec has no terms: the caller says whether that is allowed (`require_terms`)."""
    return [parse_term(part, option, usage) for part in spec.split(",") if part.strip()]


def require_terms(spec: str, option: str = "--fail-on", usage: str = GATE_USAGE) -> list[Term]:
    """`parse_terms` for an option that was given: no term at all (`--fail-on ''`, `,`)
    is an error, never a gate that silently vanishes."""
    terms = parse_terms(spec, option, usage)
    if not terms:
        raise TermError(f"{option}: no rule given ({usage})")
    return terms


def parse_term(text: str, option: str = "--fail-on", usage: str = GATE_USAGE) -> Term:
    shown = text.strip()
    m = _TERM.match(text)
    if not m:
        raise TermError(f"bad {option} rule {shown!r}: {usage}")
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
    if unit is None and None not in allowed:
        names = ", ".join(sorted(u for u in allowed if u))
        raise TermError(
            f"{option} rule {shown!r}: a number without its unit: {metric} takes {names} "
            f"(e.g. {raw}{op}{number}{'MiB' if metric == 'rss' else min(u for u in allowed if u)})"
        )
    if unit not in allowed:
        names = ", ".join(sorted(u or "a bare number" for u in allowed))
        raise TermError(f"{option} rule {shown!r}: {metric} takes {names}")
    if metric in SHARES:
        value /= 100
    elif unit in US_PER:
        value *= US_PER[unit]
    elif unit in _BYTES_PER:
        value *= _BYTES_PER[unit]
    problem = _out_of_range(metric, value)
    if problem:
        raise TermError(f"bad {option} rule {shown!r}: {problem}")
    return Term(metric, op, False, value, shown)


def _out_of_range(metric: str, value: float) -> str:
    """What makes an absolute value one no figure can be compared with ('' if none)."""
    if not math.isfinite(value):  # 1e308s in µs
        return "the value must be a finite number"
    if metric in SHARES and value > 1:
        return f"{metric} is a share: at most 100%"
    if is_latency(metric) and value > MAX_LATENCY_US:
        return "a latency is at most 1h (the longest timeout)"
    return ""


def _units(metric: str) -> set[str | None]:
    """Which units a metric takes (None: a bare number, qps's alone: a latency, a size or
    a share without its unit is a guess the reader cannot check)."""
    if is_latency(metric):
        return set(US_PER)
    if metric in SHARES:
        return {"%"}
    if metric == "rss":
        return set(_BYTES_PER)
    if metric == "cpu":
        return {"%"}
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
    """The terms of an objective (`--slo`): at least one, each an absolute upper bound
    (`<` or `<=`) on a figure that can be held to one (not qps). TermError names the
    option and the bad term, with the objective's own syntax."""
    terms = require_terms(spec, option, OBJECTIVE_USAGE)
    for t in terms:
        if t.relative:
            raise TermError(
                f"{option} rule {t.text!r}: an objective is absolute (p99<50ms, "
                "failures<0.1%); a change from a baseline is --fail-on's"
            )
        if t.op not in ("<", "<="):
            raise TermError(
                f"{option} rule {t.text!r}: an objective is a target to stay below "
                f"({OBJECTIVE_USAGE.removeprefix('use ')}); a rule that fails a run when a "
                "figure goes above a value is --fail-on's"
            )
        if t.metric == "qps":
            raise TermError(
                f"{option} rule {t.text!r}: throughput is not an objective: --capacity "
                "finds the highest load that meets the objective"
            )
        if t.value <= 0 and (t.op == "<" or t.latency):
            raise TermError(f"{option} rule {t.text!r}: a target of 0 can never be met")
    seen: dict[str, Term] = {}
    for t in terms:
        if t.metric in seen:
            raise TermError(
                f"{option}: {seen[t.metric].text!r} and {t.text!r} both hold {t.metric} to a "
                "target: give one target per figure"
            )
        seen[t.metric] = t
    return terms


# figures of a server's own processes: sampled only when stackrace started the server
# or was given its --pid
PROCESS_METRICS = frozenset({"rss", "cpu"})


def unsampled_terms(spec: str | None) -> list[str]:
    """The terms of an objective on figures of a server's processes (rss, cpu), as
    written: what a command that samples no server must refuse rather than judge."""
    if not spec:
        return []
    return [
        t.text for t in parse_terms(spec, "--slo", OBJECTIVE_USAGE) if t.metric in PROCESS_METRICS
    ]
