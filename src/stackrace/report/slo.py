"""A service-level objective: what must hold of a level, judged with complete accounting.

    slo = Slo.parse("p99<50ms,failures<0.1%")
    verdict = slo.judge_level(level)        # bench, load, the capacity search
    verdict = slo.judge_window(window, hist)  # the app, each interval
    verdict.meets, verdict.why               # False, "p99 74.1ms ≥ 50ms"

The terms are the gate's (stackrace.settings.terms: the same parser, the same units), read the
other way round: a `--fail-on` term that *holds* is a failure, an SLO term that does
*not* hold is a miss. An SLO states what must be true (`p99<50ms`), so every term is
absolute: a relative change (`qps<-10%`) has no meaning without a baseline and is
refused.

**Every SLO carries a failure budget.** A latency objective alone would be met by a
server that answers 404 in a millisecond: `load …/nonexistent --slo 'p99<50ms'` once
said "SLO met" beside "every request failed". So an SLO that names no `failures` term
carries `failures<1%` (`FAILURE_BUDGET`), shown with the objective ("p99 < 50 ms,
failures < 1 %") and judged like any term; `failures<…` names its own. And `qps` is
goodput: answers that count (2xx/3xx, or what a request expects), never error answers.

Complete accounting (the reason this is not `thresholds.evaluate`): a latency read off
the answers alone flatters a server that has stopped answering. Here the requests that
did not answer count against a latency term as well:
- a request still waiting at the end whose age is past the target is a request slower
  than the target. The engine reports how many wait and how old the oldest is, not each
  one's age, so when the oldest is past the target every waiting request is counted as
  over it: a miss must never hide behind requests that have not answered yet (a
  stated upper bound; the figure is then shown as "≥").
- a request that timed out took at least the timeout: over the target too.
The percentile is then read among answers + those, the extra ones all above the
target: `p99` is the answers' own p99 when they are few enough, and "≥ the oldest
wait" when they are more than the tail. A level with nothing answered and nothing over
the target has no latency at all: unknown, and unknown never meets an SLO.

**Only a figure measured meets.** `rss` and `cpu` are the server's processes' figures:
a server stackrace did not start and was not given the --pid of is not sampled, and
its zeros are no measurement (`load --slo 'cpu<0.001%'` once said "SLO met"). The
commands refuse such terms up front (settings.terms.unsampled_terms); here, a level of
a server not sampled (`judge_level(..., sampled=False)`) or an engine window
(`judge_window(..., unsampled=True)`) reads them "not measured", which never meets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stackrace.engine.histogram import LatencyHistogram
from stackrace.engine.model import TIMEOUT, WindowStats
from stackrace.report import thresholds
from stackrace.report.schema import Level
from stackrace.rules.breaking import step_result
from stackrace.settings.terms import (
    PROCESS_METRICS,
    SUMMARY_LATENCIES,
    Term,
    check_objective,
    compare,
    parse_term,
)

OPTION = "--slo"
# the budget every SLO carries unless it names its own failures term
FAILURE_BUDGET = "failures<1%"


@dataclass(frozen=True)
class SloCheck:
    """One term read on one level: its value (None: unknown) and whether it meets."""

    term: Term
    value: float | None
    meets: bool
    lower_bound: bool = False  # the value is at least this (requests not answered yet)
    not_measured: bool = False  # a figure nothing sampled (rss, cpu of a server not sampled)

    def shown(self) -> str:
        """'p99 74.1ms ≥ 50ms' for a miss, 'p99 12.0ms < 50ms' for a pass."""
        m = self.term.metric
        if self.not_measured:
            return f"{m} not measured (no server process sampled): never met"
        if self.value is None:
            return f"{m} unknown (no answers)"
        value = ("≥ " if self.lower_bound else "") + thresholds.fmt(m, self.value)
        target = _target(self.term)
        op = self.term.op if self.meets else _negated(self.term.op)
        return f"{m} {value} {op} {target}"


@dataclass(frozen=True)
class SloVerdict:
    checks: tuple[SloCheck, ...]

    @property
    def meets(self) -> bool:
        return all(c.meets for c in self.checks)

    @property
    def why(self) -> str:
        """The terms missed ('' when every one meets)."""
        return "; ".join(c.shown() for c in self.checks if not c.meets)

    def figures(self) -> dict[str, float]:
        """Each term's value by metric (for a probe's evidence in JSON)."""
        return {c.term.metric: c.value for c in self.checks if c.value is not None}


@dataclass(frozen=True)
class Slo:
    """The objective: its terms (the failure budget among them) and its text."""

    terms: tuple[Term, ...]
    text: str

    @classmethod
    def parse(cls, spec: str) -> Slo:
        """TermError names the bad term; a relative term is refused. Without a
        `failures` term the objective carries `FAILURE_BUDGET` (see the docstring)."""
        terms = check_objective(spec, OPTION)
        text = ", ".join(_pretty(t) for t in terms)
        if not any(t.metric == "failures" for t in terms):
            budget = parse_term(FAILURE_BUDGET, OPTION)
            terms.append(budget)
            text += f", {_pretty(budget)}"  # shown, and read back the same (a plan's)
        return cls(tuple(terms), text)

    @property
    def quantile(self) -> float | None:
        """The highest percentile asked (how many answers a probe needs), or None."""
        qs = [t.quantile for t in self.terms if t.quantile is not None]
        return max(qs) if qs else None

    @property
    def latency_target_us(self) -> float | None:
        """The first latency term's target (the line on a latency chart)."""
        return next((t.value for t in self.terms if t.latency), None)

    def judge_level(self, level: Level, sampled: bool = True) -> SloVerdict:
        """`sampled` False: the server's processes were not sampled (a --url without
        --pid): an rss or cpu term is not measured, and misses."""
        hist = LatencyHistogram.decode(level.hdr) if level.hdr else None
        checks = []
        for t in self.terms:
            if t.metric in PROCESS_METRICS and not sampled:
                checks.append(SloCheck(t, None, False, not_measured=True))
            elif t.metric in ("rss", "cpu", "failures", "qps"):
                value = thresholds.value_of(level, t.metric)
                checks.append(_check(t, value))
            else:
                checks.append(_window_check(t, level.window, hist))
        return SloVerdict(tuple(checks))

    def judge_window(
        self, window: WindowStats, hist: LatencyHistogram | None = None, unsampled: bool = False
    ) -> SloVerdict:
        """A window of the engine (the app's interval, or a total): rss and cpu are not
        in it and are left out, to be judged on the level (the app and the capacity
        search sample them there); `unsampled`: nothing samples them anywhere (`load`),
        and they are not measured: they miss."""
        checks = [
            _window_check(t, window, hist) for t in self.terms if t.metric not in PROCESS_METRICS
        ]
        if unsampled:
            checks += [
                SloCheck(t, None, False, not_measured=True)
                for t in self.terms
                if t.metric in PROCESS_METRICS
            ]
        return SloVerdict(tuple(checks))

    def on_processes(self) -> list[Term]:
        """The terms on a server's processes' figures (rss, cpu)."""
        return [t for t in self.terms if t.metric in PROCESS_METRICS]


def _pretty(t: Term) -> str:
    return f"{t.metric} {t.op} {_target(t)}"


def _target(t: Term) -> str:
    """A target as a person writes it: 50 ms, 1.5 s, 800 µs, 0.1 %."""
    v = t.value
    if t.latency:
        if v >= 1_000_000:
            return f"{v / 1_000_000:g} s"
        return f"{v / 1000:g} ms" if v >= 1000 else f"{v:g} µs"
    if t.metric in ("failures", "waiting"):
        return f"{v * 100:g} %"
    return thresholds.fmt(t.metric, v)


def _negated(op: str) -> str:
    return {"<": "≥", "<=": ">", ">": "≤", ">=": "<"}[op]


def _check(t: Term, value: float | None, lower_bound: bool = False) -> SloCheck:
    return SloCheck(t, value, value is not None and compare(value, t.op, t.value), lower_bound)


def _window_check(t: Term, w: WindowStats, hist: LatencyHistogram | None) -> SloCheck:
    if t.metric == "failures":
        return _check(t, step_result(0, w).failure_ratio)
    if t.metric == "waiting":
        return _check(t, w.waiting / w.sent if w.sent else 0.0)
    if t.metric == "qps":
        return _check(t, w.goodput)
    return _latency_check(t, w, hist)


def over_target(w: WindowStats, target_us: float) -> int:
    """Requests of the window that did not answer and are past the target: those still
    waiting when the oldest of them is (every one, as the module docstring says), and
    those that timed out."""
    waiting = w.waiting if w.waiting and w.oldest_wait_us > target_us else 0
    return waiting + w.failures.get(TIMEOUT, 0)


def _latency_check(t: Term, w: WindowStats, hist: LatencyHistogram | None) -> SloCheck:
    answered = hist.total if hist is not None else w.latency.count
    extra = over_target(w, t.value)
    total = answered + extra
    if total == 0:
        return SloCheck(t, None, False)
    floor = float(max(w.oldest_wait_us, t.value))  # what the extra ones took, at least
    if t.metric == "mean":
        mean = (w.latency.mean * answered + floor * extra) / total
        return _check(t, mean, lower_bound=extra > 0)
    if t.metric == "max":
        if extra:
            return _check(t, max(floor, float(w.latency.max)), lower_bound=True)
        return _check(t, float(w.latency.max))
    q = t.quantile
    assert q is not None
    rank = math.ceil(q * total)
    if rank > answered:  # the percentile falls among the ones over the target
        return _check(t, floor, lower_bound=True)
    # the extra ones lie above the target, so the rank-th answer is the percentile
    share = rank / answered * 100
    if hist is not None:
        return _check(t, float(hist.value_at_percentile(share)))
    if extra == 0 and t.metric in SUMMARY_LATENCIES:
        return _check(t, float(getattr(w.latency, t.metric)))
    if share == 0:  # p0: the fastest answer
        return _check(t, float(w.latency.min))
    # no histogram and a percentile the summary lacks: the nearest summary one above
    for name, p in (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p999", 99.9)):
        if share <= p:
            return _check(t, float(getattr(w.latency, name)))
    return _check(t, float(w.latency.max))
