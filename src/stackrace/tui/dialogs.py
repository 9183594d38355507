"""Modal screens over the race: a stack's log (`l`), the summary table (`t`), the
capacity ranking (`k`) and the SLO it searches under, asked in the app when the race
started without --slo (a restart would lose the race in front of the room)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Input, Label, Log, Static

from stackrace.base.atomicfile import write_atomic
from stackrace.base.printable import textual_markup as escape
from stackrace.race.live.summary import (
    SummaryContext,
    at_breaking,
    export,
    kept_up,
    levels_text,
    peak_text,
    unbroken_text,
)
from stackrace.race.live.view import SummaryRow
from stackrace.report import capacity as capacity_table
from stackrace.report.schema import CapacityResult
from stackrace.tui.format import PALETTE, fmt_level, fmt_mb
from stackrace.tui.levelchart import LevelChart, LevelSeries

# A modal screen cuts the app's bindings off (Textual's modal binding chain), so each
# dialog carries the screenshot key itself: `s` works on every screen.
SCREENSHOT = Binding("s", "app.screenshot", "screenshot")


def dialog_keys(key: str, export: str = "") -> list[BindingType]:
    """A dialog's keys, the same on each: escape, the key that opened it and `q` close
    it; `e` exports (where it has something to export: `export` says what); `s` takes
    a screenshot."""
    keys: list[BindingType] = [Binding(f"escape,{key},q", "dismiss", "close")]
    if export:
        keys.append(Binding("e", "export", export))
    return [*keys, SCREENSHOT]


class LogScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = dialog_keys("l")

    def __init__(self, title: str, text: str) -> None:
        super().__init__(classes="dialog")
        self.title_text = title
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Label(f"Log: {escape(self.title_text)}", classes="dialog-title")
            log = Log(id="log-view", highlight=False)
            yield log
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(Log).write(self.text or "(no log: this stack was not started by stackrace)")


SUMMARY_COLUMNS = (
    "stack",
    "peak req/s",
    "at",
    "breaking point",
    "kind",
    "the figure that proves it",
    "p99 there",
    "RSS before",
    "RSS peak",
)
# the widest each fixed column needs; the proof takes what is left and wraps
_FIXED_W = {"peak req/s": 14, "at": 8, "breaking point": 18, "kind": 9, "p99 there": 10}
_FIXED_W |= {"RSS before": 10, "RSS peak": 10}

KIND_STYLE = {
    "wedged": "bold red",
    "failing": "bold red",
    "starving": "bold red",
    "queueing": "bold yellow",
    "saturated": "bold magenta",
}


def summary_cells(row: SummaryRow, rate_mode: bool) -> list[str | Text]:
    """One stack's line: the breaking point's figures are its per-level table cell's
    (race/live/summary.py: one arithmetic for both)."""
    peak, brk = row.peak, row.breaking
    there = at_breaking(row)
    return [
        Text(row.name, style="bold"),
        Text(peak_text(row), justify="right") if peak else Text("–", style="dim"),
        fmt_level(peak.level, rate_mode) if peak else "–",
        Text(fmt_level(brk.level, rate_mode), style=KIND_STYLE.get(brk.kind, "bold"))
        if brk
        else Text(
            unbroken_text(row, rate_mode, short=True),
            style="green" if kept_up(row) else "magenta",
        ),
        Text(brk.kind, style=KIND_STYLE.get(brk.kind, "")) if brk else "",
        Text(
            (row.why or (brk.reason if brk else unbroken_text(row, rate_mode)))
            # why it broke, from its evidence; the knee predicted (race/live/why_view.py)
            + (f" · why: {row.cause}" if row.cause else "")
            + (f" · {row.knee}" if row.knee else "")
        ),
        there.p99() if there else "",
        fmt_mb(row.mem_before.rss) if row.mem_before else "–",
        fmt_mb(row.mem_peak) if row.mem_peak else "–",
    ]


def column_widths(rows: list[SummaryRow], width: int) -> dict[str, int]:
    """Each column's width in a table `width` wide: the names whole (up to 30), the
    fixed columns as they need, the proof the rest (at least 24, wrapped onto more
    lines): the table fits its width instead of being cut."""
    name = max([5, *(len(r.name) for r in rows)])
    widths = {"stack": min(30, name), **_FIXED_W}
    gaps = 2 * len(SUMMARY_COLUMNS)
    widths["the figure that proves it"] = max(24, width - sum(widths.values()) - gaps)
    return widths


def summary_title(from_ramp: bool, ramp_running: bool, synthetic: bool) -> str:
    if from_ramp:
        title = "Ramp result: every level from 1 up, from a clean start"
    elif ramp_running:
        title = "Summary while the ramp runs (levels so far)"
    else:
        title = "Summary of the levels explored by hand (r runs a full ramp from a clean start)"
    return ("SYNTHETIC (a model, not a measurement) · " if synthetic else "") + title


class SummaryScreen(ModalScreen[None]):
    """Side by side: peak req/s and where, the breaking point, its proof, memory; the
    levels of every stack on one chart; `e` exports Markdown and JSON."""

    BINDINGS: ClassVar[list[BindingType]] = dialog_keys("t", "export .md .json .html")

    def __init__(
        self,
        rows: list[SummaryRow],
        rate_mode: bool,
        *,
        from_ramp: bool = False,
        colors: dict[str, str] | None = None,
        synthetic: bool = False,
        ramp_running: bool = False,
        context: SummaryContext | None = None,
        page: Callable[[str], str] | None = None,
    ) -> None:
        super().__init__(classes="dialog")
        self.context = context
        self.page = page  # the race as an HTML page, given its title (race/live/page.py)
        self.rows = rows
        self.rate_mode = rate_mode
        self.from_ramp = from_ramp
        self.pane_colors = colors or {}
        self.synthetic = synthetic
        self.title_text = summary_title(from_ramp, ramp_running, synthetic)
        self.exported: tuple[object, object] | None = None

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box", id="summary-box"):
            yield Label(self.title_text, classes="dialog-title", id="summary-title")
            yield Static(self._about(), id="summary-about")
            yield DataTable(id="summary", cursor_type="row", zebra_stripes=True)
            yield LevelChart(self._series(), self.rate_mode, id="level-chart")
        yield Footer()

    def _series(self) -> list[LevelSeries]:
        out = []
        for i, row in enumerate(self.rows):
            if not row.steps:
                continue
            color = self.pane_colors.get(row.id, PALETTE[i % len(PALETTE)])
            points = [(s.level, s.rps, s.p99_us) for s in row.steps]
            broke = row.breaking.level if row.breaking else None
            out.append(LevelSeries(row.name, color, points, broke, row.knee_point))
        return out

    def _about(self) -> Text:
        """Why the ramp ended and what its clean start did (the summary's first lines),
        and every level of every stack with its state, the levels after a break too."""
        out = Text()
        c = self.context
        if c is not None:
            if c.ended:
                out.append(f"The ramp {c.ended}.\n")
            for note in c.notes:
                out.append(f"Clean start: {note}.\n")
        for row in self.rows:
            if row.steps:
                out.append(f"{row.name}: ", style="bold")
                out.append(f"{levels_text(row, self.rate_mode)}\n")
        out.rstrip()
        return out

    def on_mount(self) -> None:
        if not self.query("#summary-about"):
            return  # closed before it was shown (a replay plays both at once)
        self.query_one("#summary-about").display = bool(self._about())
        names = "  ".join(f"[{s.color}]━ {escape(s.name)}[/]" for s in self._series())
        self.query_one("#level-chart").border_title = f"every stack, level by level  {names}"
        self._fill()

    def _fill(self) -> None:
        table = self.query_one(DataTable)
        # the columns are sized to the table's width: the dialog's (96 % of the screen)
        # less its border and padding, and a vertical scrollbar's two columns, should
        # the rows need one (filled at once: a screenshot taken next shows the table)
        width = table.size.width or int(self.app.size.width * 0.96) - 6
        widths = column_widths(self.rows, width - 2)
        for name in SUMMARY_COLUMNS:
            table.add_column(name, width=widths[name], key=name)
        proof_w = widths["the figure that proves it"]
        for row in self.rows:
            cells = summary_cells(row, self.rate_mode)
            lines = max(1, -(-len(str(cells[5])) // proof_w))
            table.add_row(*cells, key=row.id, height=min(5, lines))

    def _page(self) -> Callable[[], str] | None:
        make, title = self.page, self.title_text
        return (lambda: make(title)) if make is not None else None

    def action_export(self) -> None:

        directory = Path(getattr(self.app, "screenshot_dir", "."))
        try:
            md, js = export(
                self.rows,
                self.rate_mode,
                directory,
                title=self.title_text,
                synthetic=self.synthetic,
                context=self.context,
                page=self._page(),
            )
        except OSError as exc:  # a full disk, a read-only directory: say which file, and why
            self.notify(f"summary not saved: {exc}", severity="error", timeout=10)
            return
        self.exported = (md, js)
        self.notify(f"saved {md}, {js}" + (" and its .html" if self.page is not None else ""))


class CapacityScreen(ModalScreen[None]):
    """`k`'s end: every stack ranked by its capacity under the SLO, with the load it
    held, where it broke and why, its memory and its CPU per request there (the rows
    and their order are report/capacity.py's, the same as bench's and tune's)."""

    BINDINGS: ClassVar[list[BindingType]] = dialog_keys("k", "export .html")

    def __init__(
        self,
        ranked: list[tuple[str, CapacityResult]],
        slo: str,
        ended: str,
        synthetic: bool,
        page: Callable[[str, dict[str, CapacityResult]], str] | None = None,
    ) -> None:
        super().__init__(classes="dialog")
        self.page = page  # the race and this ranking as an HTML page (race/live/page.py)
        self.exported: object | None = None
        self.ranked = ranked
        self.slo = slo
        self.ended = ended
        self.synthetic = synthetic

    def compose(self) -> ComposeResult:
        title = f"Capacity under the SLO ({self.slo}), best first"
        if self.synthetic:
            title = "SYNTHETIC (a model, not a measurement) · " + title
        with Vertical(classes="dialog-box", id="capacity-box"):
            yield Label(title, classes="dialog-title", id="capacity-title")
            yield DataTable(id="capacity", cursor_type="row", zebra_stripes=True)
            yield Static(self._sentences(), id="capacity-about")
        yield Footer()

    def action_export(self) -> None:
        """The race with this ranking as one offline page, where screenshots go."""

        if self.page is None:
            return
        directory = Path(getattr(self.app, "screenshot_dir", "."))
        path = directory / time.strftime("stackrace-capacity-%Y%m%d-%H%M%S.html")
        title = f"Capacity under the SLO ({self.slo}), best first"
        try:
            directory.mkdir(parents=True, exist_ok=True)
            write_atomic(path, self.page(title, dict(self.ranked)))
        except OSError as exc:  # a full disk, a read-only directory: say which, and why
            self.notify(f"capacity page not saved: {exc}", severity="error", timeout=10)
            return
        self.exported = path
        self.notify(f"saved {path}")

    def _sentences(self) -> Text:
        out = Text()
        if self.ended:
            out.append(f"The search {self.ended}.\n", style="dim")
        for name, c in self.ranked:
            out.append(f"{name}: ", style="bold")
            out.append(f"{c.sentence}\n")
        return out

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for name in capacity_table.HEADER:
            table.add_column(name, key=name)
        for n, (name, c) in enumerate(self.ranked, 1):
            cells = capacity_table.row(c)
            style = "bold green" if n == 1 and c.load is not None else ""
            table.add_row(str(n), Text(name, style="bold"), Text(cells[0], style=style), *cells[1:])


class SloScreen(ModalScreen[str | None]):
    """`k` without --slo: the objective to search under, typed in the app and checked
    as --slo is (`check` returns why it is refused, "" when taken); Enter starts the
    search, Escape leaves the race as it was."""

    # no `s` here: the field takes letters ("failures")
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss", "cancel")]

    def __init__(self, check: Callable[[str], str]) -> None:
        super().__init__(classes="dialog")
        self.check = check

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box", id="slo-box"):
            yield Label("Capacity under which SLO?", classes="dialog-title")
            yield Static(
                "Each stack's highest load that meets it, searched at once (as "
                "--slo: a percentile, mean, max, failures, waiting; e.g. p99<50ms or "
                "p99<100ms,failures<0.1%).",
                id="slo-about",
                markup=False,
            )
            yield Input(placeholder="p99<50ms", id="slo-input")
            yield Static("", id="slo-error")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        why = self.check(text) if text else "type an objective, e.g. p99<50ms"
        if why:
            # the user's text comes back in the reason: plain text, never markup
            self.query_one("#slo-error", Static).update(Text(why, style="bold red"))
            return
        self.dismiss(text)
