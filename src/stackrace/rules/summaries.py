"""What a summary says of a stack: its break with its tail, or how far it kept up.

    breaking_sentence(verdict)     # "queueing at c=100: 100 wait ~1.1 s each; …; p99 there 1.2 s"
    unbroken_sentence(judgments)   # "no breaking point up to c=100: p99 26 ms there, within …"
    every_level(levels, judgments) # "c=1–50 keeping up, c=100 QUEUEING, c=1,000 WEDGED"

The words bench's closing lines, the app's summary, its exports and `stackrace report`
share, from the rules' judgments (stackrace.rules.level): a break names its p99 there,
and "no breaking point" is never said bare — always with the highest level's p99 and
the bound it met, the levels not judged (the engine or a busy core was the limit) and
those that missed the SLO.
"""

from __future__ import annotations

from collections.abc import Sequence

from stackrace.rules.breaking import LevelVerdict
from stackrace.rules.level import (
    CORE_LIMITED,
    ENGINE_LIMITED,
    KEPT,
    SLO_MISSED,
    TAIL_FACTOR,
    TAIL_FLOOR_US,
    Judgment,
    level_text,
    secs,
)


def breaking_sentence(v: LevelVerdict, rate_mode: bool = False) -> str:
    """ "queueing at c=100: 100 wait ~1.1 s each, …; p99 there 1.2 s": the break, its
    proof and its tail."""
    p99 = secs(v.p99_us) if v.p99_us else "no answers"
    return f"{v.kind} at {level_text(v.level, rate_mode)}: {v.reason}; p99 there {p99}"


def unbroken_sentence(judgments: Sequence[Judgment], rate_mode: bool = False) -> str:
    """What a summary says of a stack that never broke: the highest level it kept up
    at, with its p99 and the bound that p99 met; the levels not judged and why; the
    levels that missed the SLO. Never a bare "no breaking point"."""
    kept = [j for j in judgments if j.state in KEPT]
    limited = [j for j in judgments if j.not_judged]
    parts = []
    if kept:
        top = kept[-1]
        p99 = secs(top.p99_us) if top.p99_us is not None else "no answers"
        head = f"no breaking point up to {level_text(top.level, rate_mode)}: p99 {p99} there"
        if top.tail_bound_us is not None and top.service_us is not None:
            head += (
                f", within its bound of {secs(top.tail_bound_us)} ({TAIL_FACTOR:g}× its "
                f"~{secs(top.service_us)} service time, at least +{secs(TAIL_FLOOR_US)})"
            )
        parts.append(head)
    elif not limited:
        parts.append("no level measured long enough to judge")
    if limited:
        levels = ", ".join(level_text(j.level, rate_mode) for j in limited)
        last = limited[-1]
        what = "the engine" if last.state == ENGINE_LIMITED else "a busy core"
        parts.append(f"not judged at {levels}: {what} was the limit ({last.why})")
    missed = [j for j in judgments if j.state == SLO_MISSED]
    if missed:
        levels = ", ".join(level_text(j.level, rate_mode) for j in missed)
        parts.append(f"missed the SLO at {levels} ({missed[-1].why})")
    return "; ".join(parts)


def every_level(
    levels: Sequence[int], judgments: Sequence[Judgment], rate_mode: bool = False
) -> str:
    """Each level measured and what the rules said of it, in order, levels in a row with
    one state said once ("c=1–2 keeping up, c=5–500 QUEUEING, c=1,000 FAILING"): a
    summary names every level, the ones after the break included (a ramp to c=1,000
    that said only "queueing at c=5" left the room to guess what c=1,000 did); a level
    too short to judge says so."""
    by = {j.level: j.label for j in judgments}
    runs: list[tuple[int, int, str]] = []  # first level, last level, state
    for n in levels:
        said = by.get(n, "too short to judge")
        if runs and runs[-1][2] == said:
            runs[-1] = (runs[-1][0], n, said)
        else:
            runs.append((n, n, said))
    return ", ".join(f"{_span(a, b, rate_mode)} {said}" for a, b, said in runs)


def _span(first: int, last: int, rate_mode: bool) -> str:
    """ "c=5–500", "c=1,000", "100–500 req/s": levels in a row."""
    if first == last:
        return level_text(first, rate_mode)
    return f"{first:,}–{last:,} req/s" if rate_mode else f"c={first:,}–{last:,}"


def not_judged_note(j: Judgment) -> str:
    """A table's note for a level the rules would not judge ("" for any other)."""
    if j.state == ENGINE_LIMITED:
        return f"not judged: the engine was the limit ({j.why})"
    if j.state == CORE_LIMITED:
        return f"not judged: a busy core was the limit ({j.why.split(' · ')[0]})"
    return ""
