"""Then beside now: judge an original experiment's claims against a run.

A preset that replays an experiment carries its claims (`[[claims]]`, see
`stackrace.report.schema.Claim`); `stackrace bench` stores them in the run, and this module
judges each one against the run's figures:

- **holds**: the measured figure is within the claim's bounds;
- **does not hold**: it was measured and is not;
- **cannot be tested here**: a stack or level it needs was not measured (a start-up
  failure, a reduced run), the figure does not exist (a stack that never broke, with levels
  too low to say), or the claim cannot be tested on this machine at all (`untestable`).

Every verdict carries the figure measured now and a reason. Claims are about rankings,
ratios and levels, never absolute req/s: the original hardware (a 2011 one-core VM) is
not this one. A figure measured while the engine saturated its core is judged, and the
reason says so.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from stackrace.report.schema import (
    CLAIM_KINDS,
    NOISY_SPREAD,
    BenchRun,
    Claim,
    Figure,
    Level,
    StackResult,
)

HOLDS = "holds"
FAILS = "does not hold"
UNTESTABLE = "cannot be tested here"


@dataclass(frozen=True)
class ClaimVerdict:
    claim: Claim
    status: str  # HOLDS, FAILS or UNTESTABLE
    now: str  # the figure measured, as text ("1.18×", "c=200", "none up to 1000")
    reason: str

    @property
    def then(self) -> str:
        return _then_text(self.claim)


class _Missing(Exception):
    """A figure the claim needs is not in the run: the claim cannot be tested."""


def claim_verdicts(run: BenchRun) -> list[ClaimVerdict]:
    """Every claim of the run's experiment, judged; [] when the run replays none."""
    if run.then is None:
        return []
    return [judge_claim(run, claim) for claim in run.then.claims]


def judge_claim(run: BenchRun, claim: Claim) -> ClaimVerdict:
    if claim.kind not in CLAIM_KINDS:
        return ClaimVerdict(claim, UNTESTABLE, "-", f"unknown claim kind {claim.kind!r}")
    if claim.kind == "untestable":
        return ClaimVerdict(claim, UNTESTABLE, "-", claim.why or "not testable on this machine")
    try:
        return _JUDGES[claim.kind](run, claim)
    except _Missing as exc:
        return ClaimVerdict(claim, UNTESTABLE, "-", str(exc))


# --- finding figures -------------------------------------------------------------------


def _stack(run: BenchRun, name: str) -> StackResult:
    for st in run.stacks:
        if st.name == name:
            if st.error:
                raise _Missing(f"{name} was not measured: {st.error}")
            if not st.levels:
                raise _Missing(f"{name} has no measured level")
            return st
    raise _Missing(f"{name} is not in this run")


def _level(st: StackResult, level: int | None) -> Level:
    if level is None:
        return max(st.levels, key=lambda lv: lv.concurrency)
    for lv in st.levels:
        if lv.concurrency == level:
            return lv
    measured = ", ".join(str(lv.concurrency) for lv in st.levels)
    raise _Missing(f"{st.name} was not measured at c={level} (levels: {measured})")


def _saturation(levels: list[tuple[str, Level]]) -> str:
    hot = [name for name, lv in levels if lv.engine_saturated]
    if not hot:
        return ""
    return f"; the engine saturated its core while loading {', '.join(hot)}"


def _noise(pairs: list[tuple[tuple[str, Level], tuple[str, Level], float]]) -> str:
    """Where the repeats' spread could turn the verdict on another run.

    Each entry is two compared levels and how far, relatively, their ratio is from the
    value where the verdict would change; a pair whose repeats spread (together) by more
    than that distance is named. Spread on a verdict it cannot reach is not noise."""
    close = []
    for (na, la), (nb, lb), distance in pairs:
        noise = la.spread + lb.spread
        if noise > NOISY_SPREAD and distance < noise:
            close.append(f"{na} / {nb} is {distance:.0%} from the line, their repeats {noise:.0%}")
    if not close:
        return ""
    return (
        "; within the repeats' spread (" + "; ".join(close) + "): another run may judge otherwise"
    )


def _distance(value: float, line: float) -> float:
    return abs(value - line) / line if line > 0 else float("inf")


def _within(value: float, claim: Claim) -> bool:
    if claim.at_least is not None and value < claim.at_least:
        return False
    return not (claim.at_most is not None and value > claim.at_most)


def _bounds(claim: Claim, unit: str = "") -> str:
    low, high = claim.at_least, claim.at_most
    if low is not None and high is not None:
        return f"between {low:g}{unit} and {high:g}{unit}"
    if low is not None:
        return f"at least {low:g}{unit}"
    if high is not None:
        return f"at most {high:g}{unit}"
    return "any value"


def _then_text(claim: Claim) -> str:
    if claim.kind == "ranking":  # the order claimed, beside the order measured
        return " > ".join(claim.stacks)
    if claim.then is None:
        return "-"
    if claim.kind == "ratio":
        return f"{claim.then:.2f}×"
    if claim.kind in ("breaking_point", "failures_from"):
        return f"c≈{claim.then:g}"
    return f"{claim.then:g}"


# --- the judges ------------------------------------------------------------------------


def _ratio(run: BenchRun, claim: Claim) -> ClaimVerdict:
    if len(claim.stacks) != 2:
        raise _Missing("a ratio claim names two stacks")
    a, b = (_stack(run, n) for n in claim.stacks)
    la, lb = _level(a, claim.level), _level(b, claim.level)
    if lb.rps <= 0:
        raise _Missing(f"{b.name} served nothing at c={lb.concurrency}")
    ratio = la.rps / lb.rps
    now = f"{ratio:.2f}×"
    detail = (
        f"{a.name} {la.rps:,.0f} req/s / {b.name} {lb.rps:,.0f} req/s at c={la.concurrency}"
        + _saturation([(a.name, la), (b.name, lb)])
    )
    lines = [x for x in (claim.at_least, claim.at_most) if x is not None]
    distance = min((_distance(ratio, x) for x in lines), default=float("inf"))
    detail += _noise([((a.name, la), (b.name, lb), distance)])
    ok = _within(ratio, claim)
    reason = f"{detail}; the claim wants {_bounds(claim, '×')}"
    return ClaimVerdict(claim, HOLDS if ok else FAILS, now, reason)


def _ranking(run: BenchRun, claim: Claim) -> ClaimVerdict:
    if len(claim.stacks) < 2:
        raise _Missing("a ranking claim names at least two stacks")
    figures = []
    for name in claim.stacks:
        lv = _level(_stack(run, name), claim.level)
        figures.append((name, lv))
    measured = sorted(figures, key=lambda f: f[1].rps, reverse=True)
    now = " > ".join(name for name, _ in measured)
    out_of_order = []
    close = []
    line = 1 - claim.tolerance  # the ratio at which a pair changes sides
    for (hi_name, hi), (lo_name, lo) in itertools.pairwise(figures):
        if lo.rps > 0:
            close.append(((hi_name, hi), (lo_name, lo), _distance(hi.rps / lo.rps, line)))
        # a pair counts as in order when the one claimed faster is not slower by more
        # than the tolerance (two stacks within noise of each other are tied)
        if hi.rps < lo.rps * (1 - claim.tolerance):
            out_of_order.append(f"{hi_name} {hi.rps:,.0f} < {lo_name} {lo.rps:,.0f} req/s")
    where = f" at c={claim.level}" if claim.level is not None else ""
    tied = f" (ties within {claim.tolerance:.0%})" if claim.tolerance else ""
    if out_of_order:
        reason = f"out of the claimed order{where}: " + "; ".join(out_of_order)
        return ClaimVerdict(claim, FAILS, now, reason + _saturation(figures) + _noise(close))
    reason = f"in the claimed order{where}{tied}: " + ", ".join(
        f"{n} {lv.rps:,.0f}" for n, lv in figures
    )
    return ClaimVerdict(claim, HOLDS, now, reason + _saturation(figures) + _noise(close))


def _level_claim(claim: Claim, st: StackResult, found: int | None, what: str) -> ClaimVerdict:
    """Judge a claim about a level (breaking point, first failing level) that may be None:
    None means the stack never crossed the line up to its highest measured level."""
    top = max(lv.concurrency for lv in st.levels)
    if found is not None:
        ok = _within(found, claim)
        reason = f"{st.name} {what} at c={found}; the claim wants {_bounds(claim)}"
        return ClaimVerdict(claim, HOLDS if ok else FAILS, f"c={found}", reason)
    now = f"none up to {top}"
    if claim.at_most is None:
        # the claim allows "never": it holds when the levels reached its lower bound
        if claim.at_least is None or top >= claim.at_least:
            return ClaimVerdict(claim, HOLDS, now, f"{st.name} never {what} up to c={top}")
        raise _Missing(f"{st.name} was measured up to c={top} only, below {claim.at_least:g}")
    if top >= claim.at_most:
        reason = f"{st.name} never {what} up to c={top}; the claim wants {_bounds(claim)}"
        return ClaimVerdict(claim, FAILS, now, reason)
    raise _Missing(f"{st.name} never {what} up to c={top}, below the claim's {claim.at_most:g}")


def _breaking_point(run: BenchRun, claim: Claim) -> ClaimVerdict:
    if len(claim.stacks) != 1:
        raise _Missing("a breaking_point claim names one stack")
    st = _stack(run, claim.stacks[0])
    verdict = _level_claim(claim, st, st.breaking_point, "broke")
    if st.breaking_point is not None and st.breaking_reason:
        reason = f"{verdict.reason} ({st.breaking_reason})"
        verdict = ClaimVerdict(claim, verdict.status, verdict.now, reason)
    return verdict


def _failures_from(run: BenchRun, claim: Claim) -> ClaimVerdict:
    if len(claim.stacks) != 1:
        raise _Missing("a failures_from claim names one stack")
    st = _stack(run, claim.stacks[0])
    failing = [
        lv.concurrency
        for lv in sorted(st.levels, key=lambda lv: lv.concurrency)
        if lv.failure_rate > claim.threshold
    ]
    return _level_claim(
        claim, st, failing[0] if failing else None, f"failed over {claim.threshold:.0%}"
    )


def _no_failures(run: BenchRun, claim: Claim) -> ClaimVerdict:
    if not claim.stacks:
        raise _Missing("a no_failures claim names its stacks")
    limit = claim.at_most or 0.0
    worst: list[tuple[str, int, float]] = []
    for name in claim.stacks:
        st = _stack(run, name)
        levels = [_level(st, claim.level)] if claim.level is not None else st.levels
        lv = max(levels, key=lambda lv: lv.failure_rate)
        worst.append((name, lv.concurrency, lv.failure_rate))
    bad = [(n, c, r) for n, c, r in worst if r > limit]
    now = ", ".join(f"{n} {r:.1%}" for n, _, r in worst)
    where = f" at c={claim.level}" if claim.level is not None else " at any level"
    if bad:
        reason = "; ".join(f"{n} failed {r:.2%} at c={c}" for n, c, r in bad)
        return ClaimVerdict(claim, FAILS, now, f"{reason} (at most {limit:.1%} allowed)")
    return ClaimVerdict(claim, HOLDS, now, f"no failure rate above {limit:.1%}{where}")


_JUDGES = {
    "ratio": _ratio,
    "ranking": _ranking,
    "breaking_point": _breaking_point,
    "failures_from": _failures_from,
    "no_failures": _no_failures,
}


# --- the original's figures beside now ---------------------------------------------------


@dataclass(frozen=True)
class FigureRow:
    figure: Figure
    now: float | None  # req/s now, None when not measured
    level: int | None  # the level compared
    then_rank: int
    now_rank: int | None


def figure_rows(run: BenchRun) -> list[FigureRow]:
    """The original's req/s beside this run's, with each one's rank among the figures
    compared at the same level (ranks are comparable across hardware; req/s are not)."""
    if run.then is None:
        return []
    now: dict[int, float | None] = {}
    levels: dict[int, int | None] = {}
    for i, fig in enumerate(run.then.figures):
        try:
            lv = _level(_stack(run, fig.stack), fig.level)
            now[i], levels[i] = lv.rps, lv.concurrency
        except _Missing:
            now[i], levels[i] = None, fig.level
    rows = []
    for i, fig in enumerate(run.then.figures):
        peers = [j for j, f in enumerate(run.then.figures) if f.level == fig.level]
        then_rank = 1 + sum(run.then.figures[j].then > fig.then for j in peers)
        mine = now[i]
        now_rank = (
            None
            if mine is None
            else 1 + sum((now[j] or 0.0) > mine for j in peers if now[j] is not None)
        )
        rows.append(FigureRow(fig, mine, levels[i], then_rank, now_rank))
    return rows


def summary(verdicts: list[ClaimVerdict]) -> str:
    counts = {s: sum(v.status == s for v in verdicts) for s in (HOLDS, FAILS, UNTESTABLE)}
    return ", ".join(f"{n} {status}" for status, n in counts.items() if n) or "no claims"
