"""The regression gate: compare a run against a baseline and say what crossed a threshold.

    --fail-on "qps<-10%,p99>+25%,failures>0.1%"

A rule is METRIC OP VALUE. Relative rules (with a sign, "-10%", "+25%") compare the
change from the baseline level with the same stack and concurrency; absolute rules
("0.1%" for failures, "200ms" for a latency, "5000" for qps) compare the value itself.
Metrics: qps, p50, p90, p99, p999, max, failures (failure rate), rss (memory after the
level), cpu.

Noise: when a level was measured more than once, its spread ((max − min) / median of
the repeats' req/s) is known; a rule crossed by less than that spread is "uncertain"
rather than failed, and `stackrace bench` measures that level again before judging.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field

from stackrace.report.schema import BenchRun, Level
from stackrace.units import fmt_us

_RULE = re.compile(
    r"^\s*(qps|rps|p50|p90|p99|p999|max|failures|rss|cpu)\s*([<>])\s*"
    r"([+-]?)\s*([\d.]+)\s*(%|ms|us|µs|s)?\s*$"
)


_US_PER = {"us": 1.0, "µs": 1.0, "ms": 1000.0, "s": 1_000_000.0}


@dataclass(frozen=True)
class Rule:
    metric: str
    op: str  # "<" or ">"
    relative: bool
    value: float  # a fraction for relative and percentage rules; µs for latencies
    text: str


def parse_rules(spec: str) -> list[Rule]:
    rules = []
    for part in spec.split(","):
        if not part.strip():
            continue
        m = _RULE.match(part)
        if not m:
            raise ValueError(
                f"bad --fail-on rule {part.strip()!r}: use METRIC<CHANGE% or METRIC>VALUE, "
                "e.g. qps<-10%, p99>+25%, failures>0.1%, p99>200ms"
            )
        metric, op, sign, number, unit = m.groups()
        metric = "qps" if metric == "rps" else metric
        value = float(number)
        relative = bool(sign)
        if relative:
            if unit != "%":
                raise ValueError(f"rule {part.strip()!r}: a relative change is given in %")
            value = value / 100 * (-1 if sign == "-" else 1)
        elif unit == "%":
            value /= 100
        elif unit in _US_PER:
            value *= _US_PER[unit]
        rules.append(Rule(metric, op, relative, value, part.strip()))
    return rules


def metric_value(level: Level, metric: str) -> float:
    if metric == "qps":
        return level.rps
    if metric == "failures":
        return level.failure_rate
    if metric == "rss":
        return float(level.memory_after.rss)
    if metric == "cpu":
        return level.cpu_percent
    return float(getattr(level.latency, metric))


def spread(level: Level) -> float:
    """Relative run-to-run spread of req/s over the level's repeats (0 if measured once)."""
    s = [x for x in level.samples if x > 0]
    if len(s) < 2:
        return 0.0
    return (max(s) - min(s)) / statistics.median(s)


def _fmt(metric: str, v: float) -> str:
    if metric in ("p50", "p90", "p99", "p999", "max"):
        return fmt_us(v)
    if metric == "failures":
        return f"{v * 100:.2f}%"
    if metric == "qps":
        return f"{v:,.0f} req/s"
    if metric == "rss":
        return f"{v / 1048576:.1f} MiB"
    return f"{v:.1f}%"


@dataclass
class Verdict:
    failed: list[str] = field(default_factory=list)
    uncertain: list[tuple[str, int]] = field(default_factory=list)  # (stack, concurrency)
    passed: list[str] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed


def judge(run: BenchRun, baseline: BenchRun, rules: list[Rule]) -> Verdict:
    verdict = Verdict()
    base = {(st.name, lv.concurrency, lv.rate): lv for st in baseline.stacks for lv in st.levels}
    for st in run.stacks:
        if st.error:
            verdict.failed.append(f"{st.name}: not measured ({st.error})")
            continue
        for lv in st.levels:
            old = base.get((st.name, lv.concurrency, lv.rate))
            where = f"{st.name} @ c={lv.concurrency}"
            if old is None:
                verdict.unmatched.append(where)
                continue
            noise = max(spread(lv), spread(old))
            for rule in rules:
                new_v = metric_value(lv, rule.metric)
                old_v = metric_value(old, rule.metric)
                if rule.relative:
                    if old_v == 0:
                        continue
                    change = new_v / old_v - 1
                    crossed = change < rule.value if rule.op == "<" else change > rule.value
                    margin = abs(change - rule.value)
                    said = (
                        f"{where}: {rule.metric} {_fmt(rule.metric, old_v)} → "
                        f"{_fmt(rule.metric, new_v)} ({change * 100:+.1f}%, rule "
                        f"{rule.text})"
                    )
                else:
                    crossed = new_v < rule.value if rule.op == "<" else new_v > rule.value
                    margin = abs(new_v - rule.value) / (abs(rule.value) or 1)
                    said = f"{where}: {rule.metric} {_fmt(rule.metric, new_v)} (rule {rule.text})"
                if not crossed:
                    verdict.passed.append(said)
                elif rule.metric != "failures" and margin <= noise:
                    if (st.name, lv.concurrency) not in verdict.uncertain:
                        verdict.uncertain.append((st.name, lv.concurrency))
                    verdict.passed.append(said + f" — within the measured spread {noise:.0%}")
                else:
                    verdict.failed.append(said)
    return verdict
