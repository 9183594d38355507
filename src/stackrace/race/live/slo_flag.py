"""Whether the level running now meets the SLO: the flag each pane shows under `--slo`.

    flag = slo_flag(Slo.parse("p99<50ms"), target.total)
    flag.meets, flag.text        # True, "SLO p99 < 50 ms ✓ meets · p99 12.0ms"

Judged by report/slo.py's rules (complete accounting: requests still waiting past the
target and timeouts count against a latency) on the level's running totals, not on one
250 ms interval: a p99 read off a quarter second of answers is noise, and the totals
restart with each level (Session.new_level), so they are "the current level". Until
the level has the answers its percentile needs (`needed_answers`: p99 rests on 1,000)
the flag says it is still measuring instead of guessing — unless a term already misses
on what is in (a request older than the target proves a miss however few answered).
"""

from __future__ import annotations

from dataclasses import dataclass

from stackrace.engine.model import WindowStats
from stackrace.race.core.capacity_search import needed_answers
from stackrace.report import thresholds
from stackrace.report.slo import Slo


@dataclass(frozen=True)
class SloFlag:
    meets: bool | None  # None: not enough answers yet to say
    text: str
    why: str = ""  # the terms missed, with their figures ("" unless it misses)


def slo_flag(slo: Slo, total: WindowStats) -> SloFlag:
    needed = needed_answers(slo.quantile)
    verdict = slo.judge_window(total)
    head = f"SLO {slo.text}"
    if not verdict.meets and any(c.lower_bound for c in verdict.checks if not c.meets):
        return SloFlag(False, f"{head} ✗ misses · {verdict.why}", verdict.why)
    if total.requests < needed:
        return SloFlag(None, f"{head} … {total.requests:,} of {needed:,} answers")
    if verdict.meets:
        figures = ", ".join(
            f"{c.term.metric} {thresholds.fmt(c.term.metric, c.value)}"
            for c in verdict.checks
            if c.value is not None
        )
        return SloFlag(True, f"{head} ✓ meets · {figures}")
    return SloFlag(False, f"{head} ✗ misses · {verdict.why}", verdict.why)
