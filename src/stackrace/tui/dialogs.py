"""Modal screens over the race: a stack's log (`l`) and the summary table (`t`)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Label, Log

from stackrace.race.session import SummaryRow
from stackrace.tui.format import fmt_level, fmt_mb, fmt_us
from stackrace.tui.levelchart import LevelChart, LevelSeries


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
    "kind",
    "the figure that proves it",
    "p99 there",
    "RSS before",
    "RSS now",
    "RSS peak",
)

KIND_STYLE = {"failing": "bold red", "queueing": "bold yellow", "saturated": "bold magenta"}


def summary_cells(row: SummaryRow, rate_mode: bool) -> list[str | Text]:
    peak, brk = row.peak, row.breaking
    return [
        Text(row.name, style="bold"),
        Text(f"{peak.rps:,.0f} req/s", justify="right") if peak else Text("–", style="dim"),
        fmt_level(peak.level, rate_mode) if peak else "–",
        Text(fmt_level(brk.level, rate_mode), style=KIND_STYLE.get(brk.kind, "bold"))
        if brk
        else Text("not reached", style="green"),
        Text(brk.kind, style=KIND_STYLE.get(brk.kind, "")) if brk else "",
        row.why or (brk.reason if brk else ""),
        fmt_us(brk.p99_us) if brk else "",
        fmt_mb(row.mem_before.rss) if row.mem_before else "–",
        fmt_mb(row.mem_after.rss) if row.mem_after else "–",
        fmt_mb(row.mem_peak) if row.mem_peak else "–",
    ]


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

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,t,q", "dismiss", "close"),
        Binding("e", "export", "export .md + .json"),
    ]

    def __init__(
        self,
        rows: list[SummaryRow],
        rate_mode: bool,
        *,
        from_ramp: bool = False,
        colors: dict[str, str] | None = None,
        synthetic: bool = False,
        ramp_running: bool = False,
    ) -> None:
        super().__init__(classes="dialog")
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
            yield DataTable(id="summary", cursor_type="row", zebra_stripes=True)
            yield LevelChart(self._series(), self.rate_mode, id="level-chart")
        yield Footer()

    def _series(self) -> list[LevelSeries]:
        from stackrace.tui.race import PALETTE

        out = []
        for i, row in enumerate(self.rows):
            if not row.steps:
                continue
            color = self.pane_colors.get(row.id, PALETTE[i % len(PALETTE)])
            points = [(s.level, s.rps, s.p99_us) for s in row.steps]
            out.append(
                LevelSeries(row.name, color, points, row.breaking.level if row.breaking else None)
            )
        return out

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns(*SUMMARY_COLUMNS)
        for row in self.rows:
            table.add_row(*summary_cells(row, self.rate_mode), key=row.id)
        names = "  ".join(f"[{s.color}]━ {escape(s.name)}[/]" for s in self._series())
        self.query_one("#level-chart").border_title = f"every stack, level by level  {names}"

    def action_export(self) -> None:
        from pathlib import Path

        from stackrace.race.summary import export

        directory = Path(getattr(self.app, "screenshot_dir", "."))
        try:
            md, js = export(
                self.rows,
                self.rate_mode,
                directory,
                title=self.title_text,
                synthetic=self.synthetic,
            )
        except OSError as exc:  # a full disk, a read-only directory: say which file, and why
            self.notify(f"summary not saved: {exc}", severity="error", timeout=10)
            return
        self.exported = (md, js)
        self.notify(f"saved {md} and {js}")
