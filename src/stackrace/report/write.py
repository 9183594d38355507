"""Printing a run and writing its files (JSON, CSV, Markdown, SVG chart); checking
output paths before a run and reading run files with errors that name the file."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path

import msgspec

from stackrace.report import chart, tables, thennow
from stackrace.report.schema import BenchRun, dumps, loads


def print_run(run: BenchRun, title: str | None = None) -> None:
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=160)  # a file or a pipe: no terminal to fit, keep columns whole
    s = run.settings
    console.print(
        tables.rich_table(
            run,
            title
            or f"{s.workload} ({s.path}), {s.duration:g}s per level, isolation {s.isolation}"
            + (f", {100 * s.slow_share:g}% slow clients ({s.clients})" if s.clients else ""),
        )
    )
    for st in run.stacks:
        console.print("  " + tables.breaking_line(st))
    for note in tables.notes_lines(run):
        console.print(f"  [yellow]† {note}[/]")
    if run.interrupted:
        console.print(f"[yellow]interrupted ({run.interrupted}): later levels are missing[/]")
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


def check_output_paths(paths: Mapping[str, str | None]) -> str | None:
    """Whether each output file can be written, checked before a run starts: None when
    all can, else one line naming the option and the problem.

    `paths` maps an option ("--json") to its value (None: not given). A run may take
    minutes; finding only at the end that `--json /nonexistent/dir/x.json` cannot be
    written would throw the results away. Checked: the directory exists and is one, the
    path is not a directory, the same file is not named twice, and the file can really
    be created or opened for writing (a file that did not exist is removed again).
    """
    seen: dict[str, str] = {}
    for option, value in paths.items():
        if value is None:
            continue
        if not value.strip():
            return f"{option}: empty file name"
        path = Path(value).expanduser()
        key = os.path.realpath(path)
        if key in seen:
            return f"{option} {value}: the same file as {seen[key]}"
        seen[key] = option
        parent = path.parent
        if not parent.exists():
            return f"{option} {value}: directory {parent} does not exist"
        if not parent.is_dir():
            return f"{option} {value}: {parent} is not a directory"
        if path.is_dir():
            return f"{option} {value}: is a directory, not a file"
        problem = _try_open(path)
        if problem:
            return f"{option} {value}: cannot write: {problem}"
    return None


def _try_open(path: Path) -> str | None:
    """Open the file for writing without changing it (permission bits alone miss a
    read-only file system, and root passes every access() check)."""
    existed = path.exists()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(fd)
    if not existed:
        with contextlib.suppress(OSError):
            path.unlink()
    return None


def read_run(path: str) -> BenchRun:
    """A saved run; every problem (missing, unreadable, truncated, not a run, another
    schema version) is a ValueError whose message starts with the file name."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return loads(data, path)
    except msgspec.DecodeError as exc:
        raise ValueError(
            f"{path}: not a run file written by `stackrace bench --json` ({exc})"
        ) from None
    except ValueError as exc:
        text = str(exc)
        raise ValueError(text if text.startswith(path) else f"{path}: {text}") from None
