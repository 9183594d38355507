"""Failures fail: what in a run means the thing raced did not work, whatever its speed.

A figure of req/s over answers that are all 404 is not a measurement of the app, and a
run that prints it and exits 0 tells CI that all is well. So, besides the regression
gate (which compares with a baseline), a run fails on its own when
- a stack answered no request of a level as expected (every attempt failed: refused,
  reset, timed out, or an HTTP status that is not expected, 4xx/5xx by default), or
- one of your requests (`--path`, `--scenario`) never got an expected answer on a
  stack over the whole run: a typo'd path in a mix of good ones.
An expected status (`--expect-status 404`, a scenario's `expect`) says otherwise: the
engine counts such answers as good (engine/mix.py), so they fail nothing here.
"""

from __future__ import annotations

from collections.abc import Sequence

from stackrace.engine.model import KindStats
from stackrace.report.schema import BenchRun, Level, PathResult, StackResult


def path_results(
    labels: Sequence[str], counts: Sequence[KindStats], strict: bool = True
) -> list[PathResult]:
    """Each kind of your requests with the engine's counts of it, in the mix's order
    (`strict`: as many counts as labels, else the shorter decides)."""
    return [
        PathResult(
            name=label,
            sent=k.sent,
            answered=k.answered,
            errors=k.errors,
            failed=k.failed,
            waiting=k.waiting,
            status=dict(k.status),
        )
        for label, k in zip(labels, counts, strict=strict)
    ]


def level_failed(lv: Level) -> str:
    """Why every request of this level failed (`Level.failed_entirely`: requests ended and
    none succeeded), or "" when one at least was answered well, or the level measured the
    database's failure rather than the stack."""
    if not lv.failed_entirely or lv.db_down:
        return ""
    # the tables (and the gate, below) are imported where a bench run's failures are
    # said: `load` reads this module for its own lines
    from stackrace.report.tables import no_success  # lazy: keeps load's start-up fast

    return no_success(lv)


def path_failed(st: StackResult) -> list[tuple[str, str]]:
    """(request, why) for each of your requests that got no expected answer on `st`."""
    return requests_failed(st.paths)


def requests_failed(paths: list[PathResult]) -> list[tuple[str, str]]:
    """(request, why) for each request sent that got no expected answer (bench per
    stack, `load` on its one target)."""
    out = []
    for p in paths:
        if p.sent and p.answered - p.errors <= 0:
            codes = ", ".join(f"{c}: {n:,}" for c, n in sorted(p.status.items()))
            why = f"no expected answer in {p.sent:,} sent" + (f" (HTTP {codes})" if codes else "")
            out.append((p.name, why))
    return out


def run_failures(run: BenchRun) -> list[str]:
    """One line per level or request that failed entirely (empty: none)."""
    from stackrace.report.gate import level_name  # lazy: keeps load's start-up fast

    lines = []
    for st in run.stacks:
        for lv in st.levels:
            why = level_failed(lv)
            if why:
                lines.append(f"{level_name(st.name, lv)}: {why}")
        lines += [f"{st.name} {name}: {why}" for name, why in path_failed(st)]
    return lines


def bench_failures(result: BenchRun) -> list[str]:
    """What makes the run fail without any rule: a stack not measured, a level where
    nothing succeeded, a database that failed during the run. One line each."""
    from stackrace.report.gate import level_name  # lazy: keeps load's start-up fast

    out = [f"{st.name}: not measured ({st.error})" for st in result.stacks if st.error]
    out += run_failures(result)  # every request of a level, or one of yours, failed
    db_levels = [level_name(st.name, lv) for st in result.stacks for lv in st.levels if lv.db_down]
    if db_levels:
        out.append(
            "the database failed during the run (down, restarted or its tables gone): "
            f"{', '.join(db_levels)} measured the database, not the stack, and were not judged"
        )
    return out
