"""The regression gate: compare a run against a baseline, or hold it to absolute
thresholds, and say what crossed one.

    --fail-on "qps<-10%,p99>+25%,failures>0.1%"      (with --baseline OLD.json)
    --fail-on "p99>50ms,failures>0.1%"               (with or without a baseline)

A rule is a threshold term (report/thresholds.py: METRIC OP VALUE, parsed and read on a
level there). Relative rules (with a sign, "-10%", "+25%") compare the change from the
baseline level with the same stack and concurrency; absolute rules ("0.1%" for failures,
"200ms" for a latency, "5000" for qps) compare the value itself and need no baseline. A
relative rule without a baseline is refused before any load (`check_rules`), never
silently dropped; with a baseline and no --fail-on, DEFAULT_RULES apply.

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

from dataclasses import dataclass, field

from stackrace.report import thresholds
from stackrace.report.schema import BenchRun, Level, Settings
from stackrace.report.slo import Slo
from stackrace.report.thresholds import Term, TermError

# what --fail-on means when a baseline is given and no rule is
DEFAULT_RULES = "qps<-10%,p99>+25%,failures>0.1%"

Rule = Term  # a gate rule is a threshold term (report/thresholds.py)


def parse_rules(spec: str) -> list[Rule]:
    """--fail-on's rules; a ValueError (TermError) names the bad one, and a spec with no
    rule at all (`--fail-on ''`) is one too: a gate given must never vanish."""
    return thresholds.require_terms(spec, "--fail-on")


def needs_baseline(rules: list[Rule]) -> list[Rule]:
    """The rules that compare with a baseline (a relative change: `qps<-10%`)."""
    return [r for r in rules if r.relative]


def check_rules(spec: str | None, baseline: str | None) -> list[Rule]:
    """The rules a command will judge by, checked before any load: with a baseline,
    `spec` or the default rules; without one, `spec`'s rules, every one of which must be
    absolute (a relative rule has nothing to compare with). ValueError says why not."""
    if spec is None:
        return parse_rules(DEFAULT_RULES) if baseline else []
    rules = parse_rules(spec)
    relative = needs_baseline(rules)
    if relative and not baseline:
        names = ", ".join(r.text for r in relative)
        raise TermError(
            f"--fail-on {names}: a relative rule compares with a baseline: give --baseline "
            "RUN.json, or use absolute rules (p99>50ms, failures>0.1%), which need none"
        )
    return rules


# what a server's own process tree is sampled for (not the engine's figures)
RESOURCE_METRICS = ("rss", "cpu")


def metric_value(level: Level, metric: str) -> float | None:
    """The level's figure (None: a latency of a level that got no answer)."""
    return thresholds.value_of(level, metric)


def _fmt(metric: str, v: float | None) -> str:
    return thresholds.fmt(metric, v)


# Settings whose difference makes two runs' figures incomparable: another workload or
# path is other work, a rate is open loop instead of closed, a shorter warm-up or
# timeout changes latency and failures, isolation changes which CPU the server has.
# (Read with getattr: a field a future schema drops is simply not compared.)
COMPARED_SETTINGS = ("workload", "path", "rate", "duration", "warmup", "timeout", "isolation")


@dataclass
class GateVerdict:
    failed: list[str] = field(default_factory=list)  # regressions: a rule was crossed
    uncertain: list[tuple[str, int]] = field(default_factory=list)  # (stack, concurrency)
    passed: list[str] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    # why the run could not be judged fairly: settings differ, nothing compared, …
    problems: list[str] = field(default_factory=list)
    # rules that could not be applied: memory or CPU of a server not sampled (no --pid)
    not_judged: list[str] = field(default_factory=list)
    compared: int = 0  # levels matched with a baseline level
    levels: int = 0  # levels judged (that measured something)
    baseline: bool = True  # False: absolute rules alone, no baseline
    # --slo: the levels that missed the objective ("STACK @ c=N: misses …"), and the
    # objective as read (None: no SLO was set)
    slo_missed: list[str] = field(default_factory=list)
    slo: str | None = None
    slo_levels: int = 0  # levels held to the SLO

    @property
    def ok(self) -> bool:
        return not self.failed and not self.problems and not self.slo_missed


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


def gate_verdict(run: BenchRun, baseline: BenchRun | None, rules: list[Rule]) -> GateVerdict:
    """The run against the rules: relative rules against the baseline's level with the
    same stack and level, absolute ones against each level's own figures. Without a
    baseline only absolute rules are given (check_rules) and every level is held to them."""
    verdict = GateVerdict(baseline=baseline is not None)
    if baseline is not None:
        verdict.problems.extend(settings_differences(run.settings, baseline.settings))
    base = (
        {(st.name, lv.concurrency, lv.rate): lv for st in baseline.stacks for lv in st.levels}
        if baseline is not None
        else {}
    )
    # a server raced without --pid (here or in the baseline) has no memory or CPU figure:
    # its zeros are never compared, and the verdict says which rules were not applied
    others = baseline.stacks if baseline is not None else []
    unsampled = {st.name for st in (*run.stacks, *others) if not st.sampled}
    for st in run.stacks:
        if st.error:
            verdict.failed.append(f"{st.name}: not measured ({st.error})")
            continue
        for lv in st.levels:
            where = level_name(st.name, lv)
            if lv.requests + sum(lv.failures.values()) == 0:
                verdict.failed.append(f"{where}: measured nothing (no request completed or failed)")
                continue
            verdict.levels += 1
            old = base.get((st.name, lv.concurrency, lv.rate))
            if old is None:
                if baseline is not None:
                    verdict.unmatched.append(where)
                sampled = st.name not in unsampled
                _absolute_only(verdict, where, lv, rules, baseline is not None, sampled)
                continue
            verdict.compared += 1
            noise = max(lv.spread, old.spread)
            for rule in rules:
                if rule.metric in RESOURCE_METRICS and st.name in unsampled:
                    verdict.not_judged.append(f"{where}: {rule.text} (not sampled: no --pid)")
                    continue
                new_v = metric_value(lv, rule.metric)
                if new_v is None:  # a latency of a level that got no answer
                    verdict.failed.append(
                        f"{where}: {rule.metric} {thresholds.fmt(rule.metric, None)} "
                        f"(rule {rule.text})"
                    )
                    continue
                if rule.relative:
                    old_v = metric_value(old, rule.metric)
                    if not old_v:
                        continue
                    change = new_v / old_v - 1
                    crossed = thresholds.compare(change, rule.op, rule.value)
                    margin = abs(change - rule.value)
                    said = (
                        f"{where}: {rule.metric} {_fmt(rule.metric, old_v)} → "
                        f"{_fmt(rule.metric, new_v)} ({change * 100:+.1f}%, rule "
                        f"{rule.text})"
                    )
                else:
                    crossed = thresholds.compare(new_v, rule.op, rule.value)
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
    if baseline is not None and verdict.compared == 0:
        here = sorted({level_name(st.name, lv) for st in run.stacks for lv in st.levels})
        there = sorted({level_name(st.name, lv) for st in baseline.stacks for lv in st.levels})
        verdict.problems.append(
            "nothing compared: no stack and level of this run is in the baseline "
            f"(run: {_few(here)}; baseline: {_few(there)})"
        )
    return verdict


def _absolute_only(
    verdict: GateVerdict,
    where: str,
    lv: Level,
    rules: list[Rule],
    baseline: bool = True,
    sampled: bool = True,
) -> None:
    """Hold a level to the rules that need no baseline. A rule on a figure the level does
    not have (the latency of a level that got no answer) fails: the gate never passes on
    nothing."""
    for rule in rules:
        if rule.relative:
            continue
        if rule.metric in RESOURCE_METRICS and not sampled:
            verdict.not_judged.append(f"{where}: {rule.text} (not sampled: no --pid)")
            continue
        reading = thresholds.evaluate(lv, rule)
        # with a baseline given, say this level had none in it
        said = f"{where}: {rule.metric} {_fmt(rule.metric, reading.value)} (rule {rule.text}"
        said += ", no baseline)" if baseline else ")"
        (verdict.passed if reading.holds is False else verdict.failed).append(said)


def judge_slo(run: BenchRun, slo: Slo, verdict: GateVerdict | None = None) -> GateVerdict:
    """Hold every level of the run to the objective (report/slo.py: with complete
    accounting); a level that misses it fails the run, with or without a baseline. A
    level measured while the database failed is not judged (its figures are the
    database's); a level that measured nothing misses (an SLO never passes on nothing)."""
    if verdict is None:
        verdict = GateVerdict(baseline=False)
    verdict.slo = slo.text
    for st in run.stacks:
        for lv in st.levels:
            if lv.db_down:
                continue
            verdict.slo_levels += 1
            where = level_name(st.name, lv)
            judged = slo.judge_level(lv, sampled=st.sampled)
            if not judged.meets:
                verdict.slo_missed.append(f"{where}: misses the SLO ({slo.text}): {judged.why}")
    return verdict


def _few(items: list[str], n: int = 4) -> str:
    if not items:
        return "no levels"
    more = f", … {len(items) - n} more" if len(items) > n else ""
    return ", ".join(items[:n]) + more


def verdict_lines(verdict: GateVerdict, baseline_name: str | None) -> list[str]:
    """What a command prints for a verdict: one line per cause, then the outcome.

    `GATE FAILED …` when the run could not be judged (settings differ, nothing
    compared), `REGRESSION …` per crossed rule, `(no baseline for …)` per unmatched
    level, and `gate passed: …` only when the verdict is ok.
    """
    lines = [f"GATE FAILED {p}" for p in verdict.problems]
    lines += [f"REGRESSION {line}" for line in verdict.failed]
    lines += [f"SLO MISSED {line}" for line in verdict.slo_missed]
    lines += [f"(no baseline for {where})" for where in verdict.unmatched]
    lines += [f"(not judged: {line})" for line in verdict.not_judged]
    if verdict.slo is not None and not verdict.slo_missed and verdict.slo_levels:
        lines.append(
            f"SLO met ({verdict.slo}) by all {verdict.slo_levels} "
            f"level{'s' if verdict.slo_levels != 1 else ''}"
        )
    slo_alone = verdict.slo is not None and not (verdict.passed or verdict.compared)
    if slo_alone:
        return lines  # no --fail-on rule was judged: the SLO's line says it all
    if verdict.ok and verdict.baseline:
        lines.append(
            f"gate passed: {len(verdict.passed)} checks on {verdict.compared} "
            f"level{'s' if verdict.compared != 1 else ''} against {baseline_name}"
        )
    elif verdict.ok:
        lines.append(
            f"gate passed: {len(verdict.passed)} checks on {verdict.levels} "
            f"level{'s' if verdict.levels != 1 else ''} (absolute rules, no baseline)"
        )
    return lines
