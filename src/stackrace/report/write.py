"""Printing a run and writing its files (JSON, CSV, Markdown, SVG chart)."""

from __future__ import annotations

from pathlib import Path

from stackrace.report import chart, tables, thennow
from stackrace.report.schema import BenchRun, dumps


def print_run(run: BenchRun, title: str | None = None) -> None:
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=160)  # a file or a pipe: no terminal to fit, keep columns whole
    s = run.settings
    console.print(
        tables.rich_table(
            run,
            title or f"{s.workload} ({s.path}), {s.duration:g}s per level, isolation {s.isolation}",
        )
    )
    for st in run.stacks:
        console.print("  " + tables.breaking_line(st))
    saturated = [
        f"{st.name}@{lv.concurrency}"
        for st in run.stacks
        for lv in st.levels
        if lv.engine_saturated
    ]
    if saturated:
        console.print(
            f"[yellow]engine saturated at {', '.join(saturated)}: those figures "
            "may be the engine's limit, not the server's[/]"
        )
    thennow.print_then_now(run, console)  # a run that replays an experiment: then beside now


def write_outputs(
    run: BenchRun,
    json_out: str | None = None,
    csv_out: str | None = None,
    md_out: str | None = None,
    chart_out: str | None = None,
) -> None:
    if json_out:
        Path(json_out).write_bytes(dumps(run))
    if csv_out:
        Path(csv_out).write_text(tables.to_csv(run))
    if md_out:
        Path(md_out).write_text(tables.markdown(run))
    if chart_out:
        Path(chart_out).write_text(chart.svg(run))
