"""Modal screens over the race: a stack's log (`l`) and the summary table (`t`)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Label, Log

from stackrace.race.session import SummaryRow
from stackrace.tui.format import fmt_level, fmt_mb, fmt_us


class LogScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,l,q", "dismiss", "close")]

    def __init__(self, title: str, text: str) -> None:
        super().__init__(classes="dialog")
        self.title_text = title
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Label(f"Log: {self.title_text}", classes="dialog-title")
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
    "why",
    "p99 there",
    "mem before",
    "mem now",
    "mem peak",
)


def summary_cells(row: SummaryRow, rate_mode: bool) -> list[str | Text]:
    peak, brk = row.peak, row.breaking
    return [
        Text(row.name, style="bold"),
        Text(f"{peak.rps:,.0f}", justify="right") if peak else Text("–", style="dim"),
        fmt_level(peak.level, rate_mode) if peak else "–",
        Text(fmt_level(brk.level, rate_mode), style="bold red")
        if brk
        else Text("not reached", style="green"),
        brk.reason if brk else "",
        fmt_us(brk.p99_us) if brk else "",
        fmt_mb(row.mem_before.rss) if row.mem_before else "–",
        fmt_mb(row.mem_after.rss) if row.mem_after else "–",
        fmt_mb(row.mem_peak) if row.mem_peak else "–",
    ]


class SummaryScreen(ModalScreen[None]):
    """Side by side: peak QPS and where, the breaking point, p99 there, memory."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,t,q", "dismiss", "close")]

    def __init__(self, rows: list[SummaryRow], rate_mode: bool) -> None:
        super().__init__(classes="dialog")
        self.rows = rows
        self.rate_mode = rate_mode

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box", id="summary-box"):
            yield Label(
                "Summary (levels measured so far; press r for a full ramp)", classes="dialog-title"
            )
            yield DataTable(id="summary", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns(*SUMMARY_COLUMNS)
        for row in self.rows:
            table.add_row(*summary_cells(row, self.rate_mode), key=row.id)
