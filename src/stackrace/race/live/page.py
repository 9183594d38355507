"""The app's race as a run for the HTML report: `e` in the summary, `replay --html`.

The page (report/html.py) draws a `BenchRun`; the app's summary rows (race/live/view.py
`SummaryRow`: each stack's levels as the rules judged them) and its series second by
second (race/core/series.py, or a recording's: race/playback/series.py) are put into one
here, so the app, bench and a replay hand on the same page, judged by the same rules.
What the app does not measure is left out, never made up: no per-level memory (the
summary keeps the RSS before any load and the peak, in the notes), no histogram per
level (the series keeps every second's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

import msgspec

from stackrace.race.core.machine import machine_info
from stackrace.race.live.session import Session
from stackrace.race.live.summary import SummaryContext, context
from stackrace.race.live.view import SummaryRow
from stackrace.report import html
from stackrace.report.schema import (
    SCHEMA_VERSION,
    BenchRun,
    CapacityResult,
    Level,
    Machine,
    Memory,
    Settings,
    StackResult,
)
from stackrace.report.series import StackSeries, build
from stackrace.rules.breaking import StepResult


def _level(step: StepResult, rate_mode: bool) -> Level:
    w = step.window
    return Level(
        concurrency=0 if rate_mode else step.level,
        rate=float(step.level) if rate_mode else None,
        window=w,
        memory_before=Memory(),
        memory_after=Memory(),
        cpu_percent=step.cpu_percent or 0.0,
        engine_cpu=w.engine_cpu,
        engine_saturated=False,
        hdr="",
        cpu_wait_percent=step.cpu_wait_percent or 0.0,
        fastest_us=step.fastest_us,
        engine_limit=step.engine_limit,
    )


def session_run(
    session: Session,
    rows: Sequence[SummaryRow],
    context: SummaryContext,
    series: Mapping[str, StackSeries],
    machine: Machine,
) -> BenchRun:
    """The race as a run: its settings, each stack's judged levels and its series."""

    rate_mode = session.rate is not None
    stacks = []
    for r in rows:
        m = session.core.members.get(r.id)
        notes = []
        if r.mem_before is not None:
            notes.append(f"RSS {r.mem_before.rss / 2**20:.1f} MiB before any load")
        if r.mem_peak:
            notes.append(f"{r.mem_peak / 2**20:.1f} MiB at its peak")
        stacks.append(
            StackResult(
                name=r.name,
                title=r.name,
                family=m.handle.family if m is not None else "",
                version="",
                levels=[_level(s, rate_mode) for s in r.steps],
                cpus=m.stack_cpus if m is not None else None,
                sampled=r.mem_before is not None or r.mem_peak > 0,
                series=series.get(r.id),
                error=None,
            )
        )
    s = session.core.settings
    run = BenchRun(
        schema=SCHEMA_VERSION,
        started=datetime.now(UTC).isoformat(timespec="seconds"),
        machine=machine,
        settings=Settings(**msgspec.structs.asdict(s), path=context.path),
        stacks=stacks,
        notes=[line.removeprefix("- ") for line in context.lines()]
        + (["synthetic figures (a model, not a measurement)"] if context.synthetic else []),
    )
    return run


def session_page(
    session: Session,
    rows: Sequence[SummaryRow],
    context: SummaryContext,
    series: Mapping[str, StackSeries],
    machine: Machine,
    title: str,
) -> str:
    return html.page(session_run(session, rows, context, series, machine), title=title)


def unknown_machine(created: str) -> Machine:
    """A recording's machine: not stored in it, and never this one's in its place."""
    what = "not recorded (a replay)"
    return Machine(
        hostname=what, cpu_model=what, cores=0, memory_bytes=0, kernel="", os="",
        python="", stackrace=f"recorded {created}",
    )  # fmt: skip


def summary_page(
    session: Session, title: str, capacities: Mapping[str, CapacityResult] | None = None
) -> str:
    """The race as the summary stands (`e`): its rows, its series, this machine; with
    `capacities` (`k`'s ranking, by stack name) each stack's capacity under the SLO."""

    adder = session.series
    # the seconds closed so far (the open one stays open: the race goes on)
    series = {mid: build(rows, adder.step) for mid, rows in adder.rows.items() if rows}
    run = session_run(session, session.summary(), context(session), series, machine_info())
    for st in run.stacks:
        st.capacity = (capacities or {}).get(st.name)
    return html.page(run, title=title)
