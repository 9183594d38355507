"""How `stackrace stacks` prints its rows: a table on a terminal, tab-separated lines in a pipe.

A stack's name is what the reader types next (`--stacks gunicorn-sync`), so it is never
shortened. Rich's own default shortens every column of a table wider than the
terminal ("gunicorn-s…") and takes 80 columns when stdout is a pipe, so
`stackrace stacks | grep gunicorn-sync` found nothing. Here, on a terminal, the name
column is as wide as the longest name and never wraps; the title wraps into the width
left, and why a stack cannot start is a line under the table (a terminal too narrow
for that gets the lines a pipe gets). In a pipe the rows are tab-separated fields with
one header line, the name first, for grep, cut and awk; the notes around them go to
stderr, as with `--json`. A terminal is what rich says it is, so FORCE_COLOR (a pipe
shown as a terminal) and NO_COLOR keep their meaning.

The `h2` column names the HTTP/2 variants a stack serves, as they are typed
(`hypercorn:http=2`, `:http=h2c`: stackrace.stacks.protocols); "-" where it serves
HTTP/1.1 only. In a pipe it is the last field, so the fields before it keep their places;
on a terminal it is shown where the table fits with it (a stack's name comes first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from stackrace.base import printable

COLUMNS = ("stack", "title", "family", "language", "workloads", "available", "h2")
WIDE = 110  # a terminal this wide shows the language column too
GAP = 2  # spaces between columns
TITLE_MIN = 12  # below this the title would wrap on every word: use lines instead


@dataclass(frozen=True)
class StackRow:
    """One stack as the listing shows it."""

    name: str
    title: str
    family: str
    language: str
    workloads: str  # "all", or the workloads it serves, space-separated
    available: bool
    why: str = ""  # when not available: the reason and the fix
    h2: str = "-"  # the `http` variant values it serves beyond 1.1 ("2,h2c"), or "-"


def _field(text: str) -> str:
    """A field of a tab-separated line: no tab or line break inside it."""
    return " ".join(text.split())


def tsv_lines(rows: Sequence[StackRow]) -> list[str]:
    """The header line and one line per stack, fields separated by tabs."""
    lines = ["\t".join(COLUMNS)]
    for r in rows:
        available = "yes" if r.available else f"no: {r.why}" if r.why else "no"
        fields = (r.name, r.title, r.family, r.language, r.workloads, available, r.h2)
        lines.append("\t".join(_field(f) for f in fields))
    return lines


def fits(rows: Sequence[StackRow], width: int, h2: bool = False) -> bool:
    """Whether the table fits `width` columns with every name whole: the unwrapped
    columns at their widest (the h2 column with `h2`), the title at TITLE_MIN."""
    fixed = [
        max(len("stack"), *(len(r.name) for r in rows)),
        max(len("family"), *(len(r.family) for r in rows)),
        max(len("workloads"), *(len(r.workloads) for r in rows)),
        len("available"),
        *([max(len("h2"), *(len(r.h2) for r in rows))] if h2 else []),
    ]
    return sum(fixed) + GAP * len(fixed) + TITLE_MIN <= width


def table(rows: Sequence[StackRow], width: int = 200) -> Table:
    """The terminal's table for a terminal `width` columns wide: the name column fixed
    at the longest name and never wrapped, the short columns unwrapped, the title last,
    wrapping into what is left (the language, which the title names anyway, only when
    the terminal has room for it)."""
    widest = max((len(r.name) for r in rows), default=0)
    with_language = width >= WIDE
    with_h2 = fits(rows, width, h2=True) if rows else False
    out = Table(header_style="bold underline", box=None, padding=(0, GAP, 0, 0))
    # a fixed width is never narrowed by rich; the free-text column gives way instead
    out.add_column("stack", width=max(widest, len("stack")), no_wrap=True)
    out.add_column("family", no_wrap=True)
    if with_language:
        out.add_column("language", no_wrap=True)
    out.add_column("workloads", no_wrap=True)
    if with_h2:
        out.add_column("h2", no_wrap=True)
    out.add_column("available", no_wrap=True)
    out.add_column("title", overflow="fold")
    for r in rows:
        cells = [r.name, r.family, *([r.language] if with_language else []), r.workloads]
        cells += [r.h2] if with_h2 else []
        ok = Text("yes", style="green") if r.available else Text("no", style="red")
        # a stacks file's words: `[standard]` in a title is text, not Rich markup
        shown = [printable.markup(c) for c in [*cells, r.title]]
        out.add_row(*shown[:-1], ok, shown[-1], style=None if r.available else "dim")
    return out


def why_lines(rows: Sequence[StackRow]) -> list[str]:
    """Under the table, one line per stack that cannot start here: why, and the fix (a
    sentence, too long for a cell of a table that must fit 80 columns)."""
    return [f"{r.name}: {r.why}" for r in rows if not r.available and r.why]


def on_terminal() -> bool:
    """Whether stdout is a terminal, as rich decides it (FORCE_COLOR counts as one)."""
    return Console().is_terminal


def print_rows(rows: Sequence[StackRow], console: Console | None = None) -> None:
    """The rows as a table on a terminal (one wide enough for it: else lines too),
    else as tab-separated lines."""
    console = console or Console()
    if console.is_terminal and rows and fits(rows, console.width):
        console.print(table(rows, console.width))
        for line in why_lines(rows):
            console.print(Text(line), style="dim")
        return
    file: IO[str] = console.file
    for line in tsv_lines(rows):
        file.write(line + "\n")
