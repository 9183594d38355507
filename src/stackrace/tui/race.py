"""`RaceScreen`: the live comparator — controls on top, one pane per stack, latency chart.

One timer (4 Hz) polls the session and redraws everything inside `batch_update()`; the
widgets hold no measurement logic. Commands (slider, mode, ramp) go straight to the
session, which applies them to every running stack at once.
"""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Static

from stackrace.race.core import StackState
from stackrace.race.session import Session, SessionView
from stackrace.tui.chart import PercentileChart, Series, curve_points
from stackrace.tui.dialogs import LogScreen, SummaryScreen
from stackrace.tui.pane import StackPane
from stackrace.tui.slider import ConcurrencySlider

# Distinct on dark and light backgrounds and on a washed-out projector.
PALETTE = ("#4FC3F7", "#FFB74D", "#81C784", "#F06292", "#BA68C8", "#FFF176", "#4DB6AC", "#E57373")
# ticks between latency-chart redraws: it reads whole histograms, and the distribution
# at one level settles over seconds, so every 2 s is enough
CHART_EVERY = 8
_CURVE = curve_points()


def grid_columns(n: int) -> int:
    """Columns for n panes: side by side up to 4, then two rows."""
    return max(1, n if n <= 4 else (n + 1) // 2)


class RaceScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("plus,equals_sign", "level(1)", "more load", key_display="+"),
        Binding("minus", "level(-1)", "less", key_display="−"),
        Binding("m", "toggle_mode", "mode"),
        Binding("r", "ramp", "ramp"),
        Binding("t", "summary", "table"),
        Binding("l", "log", "log"),
        Binding("a", "chart_all", "chart all"),
        Binding("c", "toggle_chart", "chart"),
        Binding("s", "app.screenshot", "screenshot"),
        Binding("q", "app.quit", "quit"),
    ]

    def __init__(self, session: Session, tick_interval: float | None = 0.25) -> None:
        super().__init__(id="race")
        self.session = session
        self.tick_interval = tick_interval
        self.panes: dict[str, StackPane] = {}
        self.pane_colors: dict[str, str] = {}
        self.focused_id: str | None = None
        self.chart_all = False
        self._last_seq = -1
        self._ticks = 0
        self._level_shown: int | None = None
        self.last_view: SessionView | None = None
        self._shown: dict[str, object] = {}

    def compose(self) -> ComposeResult:
        with Horizontal(id="controls"):
            yield Static("", id="mode-label")
            yield ConcurrencySlider(self.session.level, id="level")
            yield Static("", id="engine-health")
        yield Static("", id="status-line")
        yield Grid(id="panes")
        yield PercentileChart(id="chart")
        yield Footer()

    def on_mount(self) -> None:
        if self.tick_interval:
            self.set_interval(self.tick_interval, self.tick, name="race-tick")

    # --- the one update path ----------------------------------------------------------

    async def tick(self) -> None:
        """Poll the session and redraw every pane; called by the 4 Hz timer (and tests)."""
        view = await self.session.poll()
        self.last_view = view
        new_interval = view.seq != self._last_seq
        self._last_seq = view.seq
        self._ticks += 1
        with self.app.batch_update():
            await self._sync_panes(view)
            rate_mode = view.rate is not None
            for pv in view.panes:
                self.panes[pv.id].show(pv, new_interval, rate_mode)
            self._show_controls(view)
            if self._ticks % CHART_EVERY == 1:
                self._show_chart()

    async def _sync_panes(self, view: SessionView) -> None:
        new = [pv for pv in view.panes if pv.id not in self.panes]
        if not new:
            return
        grid = self.query_one("#panes", Grid)
        for pv in new:
            pane = StackPane(pv)
            color = PALETTE[len(self.pane_colors) % len(PALETTE)]
            self.pane_colors[pv.id] = color
            pane.styles.border_title_color = color
            self.panes[pv.id] = pane
            await grid.mount(pane)
        grid.styles.grid_size_columns = grid_columns(len(self.panes))
        if self.focused_id is None:
            self.focused_id = view.panes[0].id

    def _put(self, widget_id: str, content: str) -> None:
        """Update a top-bar Static only when its text changed (an update redraws it)."""
        if self._shown.get(widget_id) != content:
            self._shown[widget_id] = content
            self.query_one(f"#{widget_id}", Static).update(content, layout=False)

    def _show_controls(self, view: SessionView) -> None:
        rate_mode = view.rate is not None
        mode = "rate req/s" if rate_mode else "connections"
        workload = self.session.plan.settings.label()
        self._put("mode-label", f"[b]{workload}[/b]\n[dim]{mode}[/]")
        slider = self.query_one("#level", ConcurrencySlider)
        level = round(view.rate) if rate_mode else view.concurrency
        if level != self._level_shown:
            # the session moved the level (a ramp): show it without echoing a command
            self._level_shown = level
            slider.set_quietly(level)
        if self._shown.get("saturated") != view.saturated:
            self._shown["saturated"] = view.saturated
            self.query_one("#engine-health").set_class(view.saturated, "-saturated")
        if view.saturated:
            self._put(
                "engine-health",
                f"⚠ ENGINE SATURATED {view.engine_cpu:.0f}%\n[b]figures may be the engine's limit",
            )
        else:
            self._put("engine-health", f"engine CPU\n[b]{view.engine_cpu:.0f}%[/b] of a core")
        status = []
        if view.database:
            status.append(f"[b red]{view.database.upper()}: figures are the database's[/]")
        if view.shared_cores:
            # the fair figures then are each pane's CPU µs per request and its wait for a core
            status.append(f"[yellow]{view.placement}[/]")
        if not view.keepalive:
            status.append("a new connection per request")
        status.append(f"[dim]timeout {view.timeout:g}s[/]")
        if view.ramp:
            status.append(f"[b reverse] {view.ramp} [/]")
        starting = sum(p.state == StackState.STARTING for p in view.panes)
        if starting:
            status.append(f"{starting} starting…")
        if view.errors:
            status.append(f"[red]{view.errors[-1]}[/]")
        self._put("status-line", "  ".join(status))

    def _show_chart(self) -> None:
        chart = self.query_one("#chart", PercentileChart)
        if not chart.display:
            return
        focused = [self.focused_id] if self.focused_id else []
        ids = list(self.panes) if self.chart_all else focused
        series = []
        for pid in ids:
            curve = self.session.percentile_curve(pid, _CURVE)
            if curve:
                series.append(
                    Series(self.panes[pid].border_title or pid, self.pane_colors[pid], curve)
                )
        names = " ".join(f"[{s.color}]━ {s.name}[/]" for s in series)
        scope = "all stacks" if self.chart_all else "focused stack"
        chart.border_title = f"latency by percentile, {scope} (a: toggle)  {names}"
        chart.set_series(series)

    # --- focus ------------------------------------------------------------------------

    def on_descendant_focus(self, event: object) -> None:
        focused = self.app.focused
        if isinstance(focused, StackPane) and focused.pane_id != self.focused_id:
            self.focused_id = focused.pane_id
            self._show_chart()

    # --- commands ---------------------------------------------------------------------

    @on(ConcurrencySlider.Changed, "#level")
    async def level_changed(self, event: ConcurrencySlider.Changed) -> None:
        if event.value == self._level_shown:
            return
        self._level_shown = event.value
        self.session.stop_ramp()  # a hand on the slider overrides a ramp
        await self.session.set_concurrency(event.value)

    def action_level(self, delta: int) -> None:
        self.query_one("#level", ConcurrencySlider).action_step(delta)

    async def action_toggle_mode(self) -> None:
        level = self.query_one("#level", ConcurrencySlider).value
        self.session.stop_ramp()
        await self.session.set_rate(None if self.session.rate is not None else float(level))
        self.notify("constant rate (req/s per stack)" if self.session.rate else "closed loop")

    def action_ramp(self) -> None:
        if self.session.ramp is not None:
            self.session.stop_ramp()
            self.notify("ramp stopped")
            return
        self.session.start_ramp()
        self.notify("ramp: stepping the load up; breaking points get marked")

    def action_summary(self) -> None:
        self.app.push_screen(SummaryScreen(self.session.summary(), self.session.rate is not None))

    def action_log(self) -> None:
        if self.focused_id is None:
            return
        name = self.panes[self.focused_id].border_title or self.focused_id
        self.app.push_screen(LogScreen(str(name), self.session.log_text(self.focused_id)))

    def action_chart_all(self) -> None:
        self.chart_all = not self.chart_all
        self._show_chart()

    def action_toggle_chart(self) -> None:
        chart = self.query_one("#chart", PercentileChart)
        chart.display = not chart.display
        self._show_chart()
