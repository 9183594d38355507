"""Printing a run and writing its files (JSON, CSV, Markdown, SVG chart, HTML page, the
series' CSV); checking
output paths before a run and reading run files with errors that name the file.

Files are written whole or not at all (stackrace.base.atomicfile); a file that cannot be
written is one line naming it and the cause, never a traceback, and the commands print
the run's figures whatever happens to its files."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from stackrace.base import inputfile, printable
from stackrace.base.atomicfile import write_atomic
from stackrace.base.errors import StackraceError
from stackrace.report.schema import RUN_FILE_LIMIT, BenchRun, dumps, loads
from stackrace.report.series import StackSeries


def print_run(run: BenchRun, title: str | None = None) -> None:
    # the writers are imported where a run is written: `load` reads this module for its
    # output checks alone, and the tables bring the charts, flames and claims (start-up)
    from rich.console import Console  # lazy: keeps --help fast

    from stackrace.report import tables, thennow  # lazy: keeps load's start-up fast

    console = Console()
    if not console.is_terminal:
        console = Console(width=160)  # a file or a pipe: no terminal to fit, keep columns whole
    s = run.settings
    console.print(
        tables.rich_table(
            run,
            title
            or f"{s.path if s.own_requests else f'{s.workload} ({s.path})'}, "
            f"{s.duration:g}s per level, isolation {s.isolation}"
            + (f", {100 * s.slow_share:g}% slow clients ({s.clients})" if s.clients else ""),
        )
    )
    escape = printable.markup  # a run file's text is never markup nor a control byte
    for st in run.stacks:
        console.print("  " + escape(tables.breaking_line(st, run)))
    for note in tables.notes_lines(run):
        console.print(f"  [yellow]† {escape(note)}[/]")
    paths = tables.path_lines(run)
    if paths:
        console.print("  your requests, the whole run (warm-up included):")
        for line in paths:
            console.print("    " + escape(line))
    if run.interrupted:
        console.print(
            f"[yellow]interrupted ({escape(run.interrupted)}): later levels are missing[/]"
        )
    saturated = [
        f"{st.name}@{lv.concurrency}"
        for st in run.stacks
        for lv in st.levels
        if lv.engine_saturated
    ]
    if saturated:
        console.print(
            f"[yellow]engine saturated at {escape(', '.join(saturated))}: those figures "
            "may be the engine's limit, not the server's[/]"
        )
    thennow.print_then_now(run, console)  # a run that replays an experiment: then beside now


# sysexits.h EX_IOERR: the run was measured (and printed) but a file of it was not written
EXIT_NOT_WRITTEN = 74

Output = tuple[str, str | None, Callable[[], str | bytes]]  # (option, path or None, content)


def run_outputs(
    run: BenchRun,
    json_out: str | None = None,
    csv_out: str | None = None,
    md_out: str | None = None,
    chart_out: str | None = None,
    html_out: str | None = None,
    series_csv_out: str | None = None,
    baseline: BenchRun | None = None,
) -> list[Output]:
    """A run's files, as (option, path, content) for `write_files`; `baseline`: the run
    the HTML page draws beside it (report/html.py)."""
    from stackrace.report import chart, html, series, tables  # lazy: keeps load's start-up fast

    return [
        ("--json", json_out, lambda: dumps(run)),
        ("--csv", csv_out, lambda: tables.to_csv(run)),
        ("--markdown", md_out, lambda: _markdown(run)),
        ("--chart", chart_out, lambda: chart.svg(run)),
        ("--html", html_out, lambda: html.page(run, baseline)),
        ("--series-csv", series_csv_out, lambda: series.to_csv(series_of(run))),
    ]


def series_of(run: BenchRun) -> list[tuple[str, StackSeries]]:
    """Each stack's series (report/series.py), for its CSV; stacks without one left out."""
    return [(st.name, st.series) for st in run.stacks if st.series is not None]


def _markdown(run: BenchRun) -> str:
    """A run's Markdown: its levels, or (`bench --capacity`) its capacities, each
    sentence, and the machine's noise."""
    from stackrace.report import capacity, tables  # lazy: keeps load's start-up fast

    if not any(st.capacity is not None for st in run.stacks):
        return tables.markdown(run)
    lines = [capacity.markdown(run.stacks, run.settings.slo or "")]
    lines += [f"- {st.name}: {st.capacity.sentence}" for st in run.stacks if st.capacity]
    if run.noise is not None and run.noise.sentence:
        lines.append(f"- noise: {run.noise.sentence}")
    lines += [f"- † {n}" for n in run.notes]
    if run.interrupted:
        lines.append(
            f"- interrupted ({run.interrupted}): no capacity claimed from a search that did not end"
        )
    return "\n".join(lines) + "\n"


def write_files(outputs: Iterable[Output]) -> list[str]:
    """Write every file given, each whole or not at all (stackrace.base.atomicfile); one
    line per file that could not be written, naming the option, the file and the cause.

    One failure does not stop the others: on a disk with room for a small CSV but not
    for the JSON, the CSV is still written."""
    problems = []
    for option, path, content in outputs:
        if not path:
            continue
        try:
            write_atomic(Path(path).expanduser(), content())
        except OSError as exc:
            why = exc.strerror or str(exc)
            problems.append(f"{option} {path}: not written: {why}")
    return problems


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


class RunFileError(StackraceError, ValueError):
    """A run file that cannot be read; the message starts with the file name."""

    exit_code = 2  # input that cannot be used: refused before anything starts


def read_run(path: str) -> BenchRun:
    """A saved run; every problem (missing, unreadable, truncated, not a run, another
    schema version) is a RunFileError whose message starts with the file name."""
    try:
        data = inputfile.read_bytes(path, limit=RUN_FILE_LIMIT)
    except inputfile.InputFileError as exc:
        raise RunFileError(str(exc)) from None
    try:
        return loads(data, path)
    except ValueError as exc:
        text = str(exc)
        raise RunFileError(text if text.startswith(path) else f"{path}: {text}") from None
