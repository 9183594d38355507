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

A gate never passes on nothing. Besides regressions, the verdict fails, one line per
cause, when:
- the run and the baseline differ in a setting that changes what the figures mean
  (`COMPARED_SETTINGS`: workload, path, rate, duration, warm-up, timeout, isolation);
- no level of the run has a counterpart in the baseline (nothing was compared);
- a level measured nothing (no request completed or failed);
- a level with no counterpart breaks an absolute rule (`failures>0.1%`, `p99>200ms`):
  those need no baseline, so an unmatched level is still held to them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from stackrace.report.schema import BenchRun, Level, Settings
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


# what a server's own process tree is sampled for (not the engine's figures)
RESOURCE_METRICS = ("rss", "cpu")


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


# Settings whose difference makes two runs' figures incomparable: another workload or
# path is other work, a rate is open loop instead of closed, a shorter warm-up or
# timeout changes latency and failures, isolation changes which CPU the server has.
# (Read with getattr: a field a future schema drops is simply not compared.)
COMPARED_SETTINGS = ("workload", "path", "rate", "duration", "warmup", "timeout", "isolation")


@dataclass
class Verdict:
    failed: list[str] = field(default_factory=list)  # regressions: a rule was crossed
    uncertain: list[tuple[str, int]] = field(default_factory=list)  # (stack, concurrency)
    passed: list[str] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    # rules that could not be applied: memory or CPU of a server not sampled (no --pid)
    not_judged: list[str] = field(default_factory=list)
    # why the run could not be judged fairly: settings differ, nothing compared, …
    problems: list[str] = field(default_factory=list)
    compared: int = 0  # levels matched with a baseline level

    @property
    def ok(self) -> bool:
        return not self.failed and not self.problems


def settings_differences(run: Settings, baseline: Settings) -> list[str]:
    """One line per compared setting that differs between the run and the baseline."""
    out = []
    for name in COMPARED_SETTINGS:
        new, old = getattr(run, name, None), getattr(baseline, name, None)
        if new != old:
            out.append(
                f"setting {name} differs: {_setting(new)} here, {_setting(old)} in the baseline"
            )
    return out


def _setting(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    return repr(value) if isinstance(value, str) else str(value)


def level_name(stack: str, level: Level) -> str:
    """How verdict lines name a stack's level: each line about it starts with this and
    ": " (report/junit.py files the lines under their levels by it)."""
    return f"{stack} @ c={level.concurrency}"


def judge(run: BenchRun, baseline: BenchRun, rules: list[Rule]) -> Verdict:
    verdict = Verdict()
    verdict.problems.extend(settings_differences(run.settings, baseline.settings))
    base = {(st.name, lv.concurrency, lv.rate): lv for st in baseline.stacks for lv in st.levels}
    # a server raced without --pid (here or in the baseline) has no memory or CPU figure:
    # its zeros are never compared, and the verdict says which rules were not applied
    unsampled = {st.name for st in (*run.stacks, *baseline.stacks) if not st.sampled}
    for st in run.stacks:
        if st.error:
            verdict.failed.append(f"{st.name}: not measured ({st.error})")
            continue
        for lv in st.levels:
            old = base.get((st.name, lv.concurrency, lv.rate))
            where = level_name(st.name, lv)
            if lv.requests + sum(lv.failures.values()) == 0:
                verdict.failed.append(f"{where}: measured nothing (no request completed or failed)")
                continue
            if old is None:
                verdict.unmatched.append(where)
                sampled = st.name not in unsampled
                _absolute_only(verdict, where, lv, rules, sampled)
                continue
            verdict.compared += 1
            noise = max(lv.spread, old.spread)
            for rule in rules:
                if rule.metric in RESOURCE_METRICS and st.name in unsampled:
                    verdict.not_judged.append(f"{where}: {rule.text} (not sampled: no --pid)")
                    continue
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
                    crossed = _crosses(new_v, rule)
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
    if verdict.compared == 0:
        here = sorted({level_name(st.name, lv) for st in run.stacks for lv in st.levels})
        there = sorted({level_name(st.name, lv) for st in baseline.stacks for lv in st.levels})
        verdict.problems.append(
            "nothing compared: no stack and level of this run is in the baseline "
            f"(run: {_few(here)}; baseline: {_few(there)})"
        )
    return verdict


def _crosses(value: float, rule: Rule) -> bool:
    return value < rule.value if rule.op == "<" else value > rule.value


def _absolute_only(
    verdict: Verdict, where: str, lv: Level, rules: list[Rule], sampled: bool = True
) -> None:
    """Hold a level without a baseline to the rules that need none."""
    for rule in rules:
        if rule.relative:
            continue
        if rule.metric in RESOURCE_METRICS and not sampled:
            verdict.not_judged.append(f"{where}: {rule.text} (not sampled: no --pid)")
            continue
        value = metric_value(lv, rule.metric)
        said = f"{where}: {rule.metric} {_fmt(rule.metric, value)} (rule {rule.text}, no baseline)"
        (verdict.failed if _crosses(value, rule) else verdict.passed).append(said)


def _few(items: list[str], n: int = 4) -> str:
    if not items:
        return "no levels"
    more = f", … {len(items) - n} more" if len(items) > n else ""
    return ", ".join(items[:n]) + more


def verdict_lines(verdict: Verdict, baseline_name: str) -> list[str]:
    """What a command prints for a verdict: one line per cause, then the outcome.

    `GATE FAILED …` when the run could not be judged (settings differ, nothing
    compared), `REGRESSION …` per crossed rule, `(no baseline for …)` per unmatched
    level, and `gate passed: …` only when the verdict is ok.
    """
    lines = [f"GATE FAILED {p}" for p in verdict.problems]
    lines += [f"REGRESSION {line}" for line in verdict.failed]
    lines += [f"(no baseline for {where})" for where in verdict.unmatched]
    lines += [f"(not judged: {line})" for line in verdict.not_judged]
    if verdict.ok:
        lines.append(
            f"gate passed: {len(verdict.passed)} checks on {verdict.compared} "
            f"level{'s' if verdict.compared != 1 else ''} against {baseline_name}"
        )
    return lines
