"""`StackPane`: one running stack's live figures, redrawn from a `PaneView` each tick.

The pane computes nothing: it formats the view it is handed and keeps the last minute of
QPS and memory for its sparklines. Every update is a cheap `Static.update(layout=False)`
and is skipped when the text did not change.
"""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Digits, Sparkline, Static

from stackrace.engine.model import FAILURE_KINDS, LatencySummary, WindowStats
from stackrace.race.core import StackState
from stackrace.race.session import PaneView
from stackrace.ramp import VERDICT_KINDS
from stackrace.tui.format import FAILURE_LABELS, fmt_lat, fmt_level, fmt_mb

HISTORY = 60  # sparkline points: one minute, one per second
PER_POINT = 4  # intervals (of 250 ms) averaged into one sparkline point
QPS_EVERY = 2  # intervals averaged into the big QPS figure

_STATE_LABELS = {
    StackState.STARTING: "starting…",
    StackState.WARMING: "warming",
    StackState.READY: "ready",
    StackState.CRASHED: "CRASHED",
    StackState.STOPPED: "stopped",
}


_PERCENTILES = ("p50", "p90", "p99", "p99.9", "max")


def latency_lines(lat: LatencySummary, unc: LatencySummary | None, width: int = 36) -> Text:
    """A percentile table in `width` columns; fixed columns so figures do not jump.

    In rate mode a second row holds the uncorrected (send-to-response) figures. A pane
    too narrow for all five columns drops them from the right (max first).
    """
    label = 4 if unc is not None else 0
    ncols = max(3, min(5, (width - label) // 7))
    col = max(7, min(9, (width - label) // ncols))
    head = Text(" " * label + "".join(f"{n:>{col}}" for n in _PERCENTILES[:ncols]), style="dim")
    rows = [head, _latency_row("co" if unc else "", lat, col, ncols, label, bold=True)]
    if unc is not None:
        rows.append(_latency_row("raw", unc, col, ncols, label, bold=False))
    return Text("\n", no_wrap=True).join(rows)


def _latency_row(
    label: str, lat: LatencySummary, col: int, ncols: int, label_w: int, bold: bool
) -> Text:
    t = Text(f"{label:<{label_w}}", style="dim")
    if lat.count == 0:
        t.append("".join(f"{'–':>{col}}" for _ in range(ncols)), style="dim")
        return t
    values = (lat.p50, lat.p90, lat.p99, lat.p999, lat.max)[:ncols]
    for i, v in enumerate(values):
        t.append(f"{fmt_lat(v):>{col}}", style="bold" if bold and i == 2 else "")
    return t


def three_figures(value: float) -> int:
    """Round to three significant figures: what a room can read, and steadier to redraw."""
    n = round(value)
    if n < 1000:
        return n
    scale = 10 ** (len(str(n)) - 3)
    return round(n / scale) * scale


class QpsDigits(Digits):
    """Digits that never ask for a layout pass: the .tcss fixes their size (1fr × 3).

    Stock `Digits.update` re-lays out the whole screen whenever the figure gains or loses
    a digit (9,990 → 10,000), which costs more than all the figures of a tick together.
    """

    def update(self, value: str) -> None:
        self._value = value
        self.refresh()


class StackPane(Vertical, can_focus=True):
    """Figures for one stack (or URL target); focus it to chart its latency."""

    def __init__(self, view: PaneView) -> None:
        super().__init__(id=f"pane-{view.id}", classes="stack-pane")
        self.pane_id = view.id
        self.border_title = view.name
        self.rps_history: deque[float] = deque(maxlen=HISTORY)
        self.rss_history: deque[float] = deque(maxlen=HISTORY)
        self.failures_seen: dict[str, int] = {}
        self._texts: dict[str, object] = {}
        self._family = view.family
        self._last_window: WindowStats | None = None
        self._classes_on: dict[str, bool] = {}
        self._rps_acc: list[float] = []
        self._rss_acc: list[float] = []
        self._qps_acc: list[float] = []

    def compose(self) -> ComposeResult:
        yield Static("", id="head", classes="head")
        yield Static("", id="breaking", classes="breaking")
        yield Static("", id="log", classes="log")
        with Vertical(id="figures"):
            yield QpsDigits("0", id="qps")
            yield Sparkline([], id="qps-spark")
            yield Static("", id="latency")
            yield Static("", id="failures")
            yield Static("", id="memory")
            yield Sparkline([], id="mem-spark")
            yield Static("", id="cpu")

    # --- helpers --------------------------------------------------------------------

    def _set(self, widget_id: str, content: str | Text, layout: bool = False) -> None:
        """Update a Static only when its content changed.

        Figures keep their line count (fixed heights in the .tcss), so they skip the
        layout pass; the log and the breaking mark change height and ask for one.
        """
        key = content.plain + str(content.spans) if isinstance(content, Text) else content
        if self._texts.get(widget_id) == key:
            return
        self._texts[widget_id] = key
        self.query_one(f"#{widget_id}", Static).update(content, layout=layout)

    def _flag(self, name: str, on: bool) -> None:
        """set_class only on a change: each call restyles the pane and its children."""
        if self._classes_on.get(name) != on:
            self._classes_on[name] = on
            self.set_class(on, name)

    def _subtitle(self, text: str) -> None:
        if self.border_subtitle != text:
            self.border_subtitle = text

    @staticmethod
    def _sample(acc: list[float], value: float, history: deque[float], spark: Sparkline) -> None:
        """Average PER_POINT intervals into one sparkline point: a 1 Hz redraw, not 4 Hz."""
        acc.append(value)
        if len(acc) >= PER_POINT:
            history.append(sum(acc) / len(acc))
            acc.clear()
            spark.data = list(history)  # a new list: Sparkline does not see in-place changes

    # --- one tick -------------------------------------------------------------------

    def show(self, view: PaneView, new_interval: bool, rate_mode: bool) -> None:
        """Draw `view`; `new_interval` says whether the engine published new figures."""
        self._subtitle(_STATE_LABELS[view.state])
        for state in StackState:
            self._flag(f"-{state.value}", view.state == state)
        self._flag("-broken", view.verdict is not None)
        self._flag("-rate", rate_mode)
        t = view.target
        level = ""
        if t is not None:
            level = fmt_level(round(t.rate) if t.rate else t.concurrency, rate_mode)
            level += f" · {t.connections:,} open"
        self._set("head", f"{self._family}  {level}")
        if view.state == StackState.CRASHED:
            log = Text("\n".join(view.log_tail) or "(no log)", style="red")
            self._set("log", log, layout=True)
        v = view.verdict
        for kind in VERDICT_KINDS:
            self._flag(f"-{kind}", v is not None and v.kind == kind)
        if v is not None:
            self._set(
                "breaking",
                f"▲ {v.kind.upper()} at {fmt_level(v.level, rate_mode)}: {v.reason}",
            )
        elif view.breaking is not None:
            b = view.breaking
            self._set(
                "breaking",
                f"broke first at {fmt_level(b.level, rate_mode)} ({b.kind}: {b.reason})",
            )
        else:
            self._set("breaking", "")
        if view.engine_limited:
            self._subtitle(f"ENGINE-LIMITED: {view.engine_limit}")
        elif view.refused:
            self._subtitle("REFUSED by the engine")
        if t is not None and new_interval:
            self._show_interval(t.interval)
        res = view.resources
        if res is not None and new_interval:
            spark = self.query_one("#mem-spark", Sparkline)
            self._sample(self._rss_acc, res.rss, self.rss_history, spark)
        mem = Text(no_wrap=True)
        if res is not None:
            mem.append("RSS ", style="dim").append(fmt_mb(res.rss), style="bold")
            mem.append("  USS ", style="dim").append(fmt_mb(res.uss))
        else:
            mem.append("RSS –", style="dim")
        if view.baseline is not None:
            mem.append("  before ", style="dim").append(fmt_mb(view.baseline.rss))
        self._set("memory", mem)
        cpu = Text(no_wrap=True)
        cpu.append("CPU ", style="dim")
        cpu.append(f"{res.cpu_percent:.0f}%" if res is not None else "–", style="bold")
        if view.cpu_us_per_request is not None:
            cpu.append(f"  {view.cpu_us_per_request:,.0f} µs/req", style="")
        if res is not None and res.cpu_wait_percent >= 5:
            cpu.append(f"  waited {res.cpu_wait_percent:.0f}% for a core", style="bold yellow")
        if view.external and res is None:
            cpu.append("  (no pid: give --pid)", style="dim")
        self._set("cpu", cpu)

    def on_resize(self) -> None:
        # the percentile table is laid out for the pane's width
        if self._last_window is not None:
            self._show_latency(self._last_window)

    def _show_latency(self, w: WindowStats) -> None:
        width = self.content_size.width or 36  # 0 before the first layout
        self._set("latency", latency_lines(w.latency, w.latency_uncorrected, width))

    def _show_interval(self, w: WindowStats) -> None:
        self._last_window = w
        self._qps_acc.append(w.rps)
        if len(self._qps_acc) >= QPS_EVERY:
            # the big figure is the mean of the last half second: steadier for a room to
            # read, and half the redraws of the most expensive widget in the pane
            qps = f"{three_figures(sum(self._qps_acc) / len(self._qps_acc)):,}"
            self._qps_acc.clear()
            if qps != self._texts.get("qps"):
                self._texts["qps"] = qps
                self.query_one("#qps", QpsDigits).update(qps)
        self._sample(
            self._rps_acc, w.rps, self.rps_history, self.query_one("#qps-spark", Sparkline)
        )
        self._show_latency(w)
        rising = False
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append("fail ", style="dim")
        for kind in FAILURE_KINDS:
            now = w.failures.get(kind, 0)
            total = self.failures_seen.get(kind, 0) + now
            if not total:
                continue
            self.failures_seen[kind] = total
            label = FAILURE_LABELS[kind]
            if kind == "http_status":
                codes = ",".join(str(c) for c in sorted(w.status) if c >= 400)
                label = f"HTTP {codes}" if codes else label
            if now:
                rising = True
                line.append(f"{label} {total:,} (+{now:,}) ", style="bold")
            else:
                line.append(f"{label} {total:,} ", style="")
        if not self.failures_seen:
            line.append("none", style="green" if not w.waiting else "")
        if w.waiting:
            line.append(f" waiting {w.waiting:,}", style="bold" if w.stale else "")
            if w.oldest_wait_us:
                line.append(f" (oldest {fmt_lat(w.oldest_wait_us)})", style="dim")
        self._flag("-failing", rising)
        self._set("failures", line)
