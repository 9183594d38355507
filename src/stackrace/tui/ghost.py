"""`GhostPane`: an earlier run's figures at the live level, beside the live panes."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from stackrace.base.printable import textual_markup as escape
from stackrace.base.slug import slug
from stackrace.race.playback.ghost import GhostView
from stackrace.tui.bignum import BigNumber
from stackrace.tui.format import fmt_lat, fmt_level, fmt_mb


def ghost_widget_id(ghost_id: str) -> str:
    return slug(ghost_id, prefix="ghost")


class GhostPane(Vertical):
    """Dimmed, dashed: what `view.label` measured for this stack at the live level."""

    def __init__(self, view: GhostView) -> None:
        # a ghost's id holds its file's label and stack names (user text): slug it
        super().__init__(id=ghost_widget_id(view.id), classes="ghost-pane")
        self.stack_id = view.stack_id
        self.border_title = escape(f"{view.name} · {view.label}")
        self.border_subtitle = view.source
        self._shown: tuple[object, ...] | None = None

    def compose(self) -> ComposeResult:
        yield Static("", classes="ghost-head")
        yield BigNumber("–", "req/s", classes="ghost-qps")
        yield Static("", classes="ghost-figures")

    def show(self, view: GhostView, rate_mode: bool) -> None:
        key = (view.level, view.at, rate_mode)
        if key == self._shown:
            return
        self._shown = key
        at = view.at
        head = self.query_one(".ghost-head", Static)
        figures = self.query_one(".ghost-figures", Static)
        qps = self.query_one(".ghost-qps", BigNumber)
        if at is None:
            head.update(Text("never measured in this mode", style="dim"), layout=False)
            qps.update("–")
            figures.update("", layout=False)
            return
        where = fmt_level(at.level, rate_mode)
        note = "" if at.level == view.level else f" (nearest to {fmt_level(view.level, rate_mode)})"
        head.update(Text(f"{view.label}, at {where}{note}", style="italic"), layout=False)
        qps.update(f"{round(at.rps):,}")
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append("p50 ", style="dim").append(fmt_lat(at.p50_us))
        t.append("  p99 ", style="dim").append(fmt_lat(at.p99_us), style="bold")
        t.append("\nfailed ", style="dim").append(f"{100 * at.failed_ratio:.1f} %")
        if at.rss:
            t.append("\nRSS ", style="dim").append(fmt_mb(at.rss))
        figures.update(t, layout=False)
