"""`RaceScreen`: the live comparator — controls on top, one pane per stack, latency chart.

One timer (4 Hz) polls the session and redraws everything inside `batch_update()`; the
widgets hold no measurement logic. Commands (slider, mode, ramp) go straight to the
session, which applies them to every running stack at once. The panes, side by side and
made to compare, are stackrace.tui.pane_grid's; the grid's shape stackrace.tui.layout's;
what the top bar says stackrace.tui.status_line's.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Static

from stackrace.base.printable import textual_markup as escape
from stackrace.race.live.page import summary_page
from stackrace.race.live.session import Session
from stackrace.race.live.summary import context as summary_context
from stackrace.race.live.view import SessionView
from stackrace.tui.chart import SLO_COLOR, PercentileChart, Series, curve_points
from stackrace.tui.dialogs import CapacityScreen, LogScreen, SloScreen, SummaryScreen
from stackrace.tui.evidence import EvidenceScreen
from stackrace.tui.layout import grid_shape
from stackrace.tui.pane import StackPane
from stackrace.tui.pane_grid import PaneGrid
from stackrace.tui.slider import LevelSlider
from stackrace.tui.status_line import engine_health, status_line
from stackrace.tui.thennow import ThenNowStrip

if TYPE_CHECKING:
    from stackrace.race.live.replay import ReplayPlayer

# ticks between latency-chart redraws: it reads whole histograms, and the distribution
# at one level settles over seconds, so every 2 s is enough
CHART_EVERY = 8
_CURVE = curve_points()


class RaceScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("plus,equals_sign", "level(1)", "more load", key_display="+"),
        Binding("minus", "level(-1)", "less", key_display="−"),
        Binding("m", "toggle_mode", "mode"),
        Binding("r", "ramp", "ramp"),
        Binding("k", "capacity", "capacity"),
        Binding("t", "summary", "table"),
        Binding("l", "log", "log"),
        Binding("a", "chart_all", "chart all"),
        Binding("c", "toggle_chart", "chart"),
        Binding("b", "projector", "big"),
        Binding("n", "then_now", "then/now", show=False),
        Binding("q", "app.quit", "quit"),
        # after quit: a narrow footer drops it before it drops quit
        Binding("w", "evidence", "why"),
        # a replay's controls (only while replaying: the footer shows these instead of
        # the load's keys, which a replay does not take)
        Binding("space", "replay_pause", "pause"),
        Binding("greater_than_sign,full_stop", "replay_speed(1)", "faster", key_display=">"),
        Binding("less_than_sign,comma", "replay_speed(-1)", "slower", key_display="<"),
        Binding("right_square_bracket", "replay_seek(10)", "+10 s", key_display="]"),
        Binding("left_square_bracket", "replay_seek(-10)", "−10 s", key_display="["),
    ]

    def __init__(
        self,
        session: Session,
        tick_interval: float | None = 0.25,
        projector: bool = False,
        player: ReplayPlayer | None = None,
    ) -> None:
        super().__init__(id="race")
        self.player = player  # a replay: the recording sets the load, not the keys
        self.projector = projector
        self.chart_wanted: bool | None = None  # the user's c: None = when there is room
        self.then_now_wanted = True  # n: the classic experiment's strip, when there is one
        self._done_seen: dict[str, bool] = {}  # what has ended, as last seen (_ended)
        self.session = session
        self.tick_interval = tick_interval
        self.grid = PaneGrid(projector, id="panes")
        # the grid's own (never rebound): the screen reads them for focus, chart, dialogs
        self.panes = self.grid.panes
        self.ghost_panes = self.grid.ghost_panes
        self.pane_colors = self.grid.pane_colors
        self.focused_id: str | None = None
        self.chart_all = False
        self._last_seq = -1
        self._ticks = 0
        self._level_shown: int | None = None
        self.last_view: SessionView | None = None
        self._shown: dict[str, object] = {}

    def compose(self) -> ComposeResult:
        yield Static("", id="banner")
        with Horizontal(id="controls"):
            yield Static("", id="mode-label")
            yield LevelSlider(self.session.level, id="level")
            yield Static("", id="engine-health")
        yield Static("", id="status-line")
        with Horizontal(id="race-body"):
            yield self.grid
            yield ThenNowStrip(id="thennow")
        yield PercentileChart(id="chart")
        # compact: at 100 columns the keys a speaker needs (+, −, …, b, q) all fit
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.set_class(self.projector, "-projector")
        # a replay: the recording sets the load, so the slider's keys leave the footer
        self.query_one("#level", LevelSlider).set_read_only(self.player is not None)
        if self.projector:  # (--big): a recording starts with it
            self.session.note_view("projector", "on")
        banner = self._banner()
        self.query_one("#banner", Static).update(banner)
        self.query_one("#banner").display = bool(banner)
        if self.tick_interval:
            self.set_interval(self.tick_interval, self.tick, name="race-tick")

    def _banner(self) -> str:
        if self.session.synthetic:
            return (
                " SYNTHETIC DEMO: no servers, no load; every figure comes from a queueing "
                "model (stackrace --demo) "
            )
        return ""

    def on_resize(self) -> None:
        self._relayout()

    def _relayout(self) -> None:
        """Columns, rows and whether the latency chart fits, for this size and pane count."""
        if not self.panes:
            return
        width, height = self.size
        strip = self.query_one("#thennow")
        if strip.display:  # the classic experiment's strip takes its columns first
            width -= strip.outer_size.width or min(52, max(30, width * 3 // 10))
        banner = 1 if self.query_one("#banner").display else 0
        n = len(self.panes) + len(self.ghost_panes)
        cols, _rows, room = grid_shape(n, width, height - banner, self.projector)
        grid = self.grid
        if grid.styles.grid_size_columns != cols:
            grid.styles.grid_size_columns = cols
        chart = self.query_one("#chart", PercentileChart)
        show = (room if self.chart_wanted is None else self.chart_wanted) and not self.projector
        if chart.display != show:
            chart.display = show
        # once the grid has its new shape, every pane's digits at one size
        self.call_after_refresh(self.grid.share_scale)

    # --- the one update path ----------------------------------------------------------

    async def tick(self) -> None:
        """Poll the session and redraw every pane; called by the 4 Hz timer (and tests)."""
        view = await self.session.poll()
        if self.grid.closing:
            return  # the app closed during the poll (a web page closed): nothing to draw
        new_interval = view.seq != self._last_seq
        self._last_seq = view.seq
        self._ticks += 1
        with self.app.batch_update():
            added = await self.grid.sync(view)
            if self.grid.closing:
                return  # the app closed while panes were mounted (a web page closed)
            if added:
                self._relayout()
                if self.focused_id is None and view.panes:
                    self.focused_id = view.panes[0].id
            self.grid.show(view, new_interval)
            self._show_controls(view)
            # on an interval the panes redraw on too: one frame, not two
            if self._ticks == 1 or (new_interval and view.seq % CHART_EVERY == 0):
                self._show_chart()
                self._show_then_now()
        self.last_view = view  # (once drawn: what a reader of it sees on the screen)
        if self.player is not None:
            self._replay_view()
        if self._ended("ramp", view.ramp_done):
            # a ramp ended: its findings, at once (a silent end tells the room nothing)
            self.notify("ramp done: every stack's levels and breaking points")
            self.action_summary()
        if self._ended("capacity", view.capacity_done):
            # the capacity search ended: its ranking at once
            self.notify("capacity search done: every stack ranked under the SLO")
            self._open_capacity()

    def _ended(self, what: str, done: bool) -> bool:
        """True on the one view where `what` (a ramp, a capacity search) turns done: its
        end is announced once, and again after the next one has started and ended."""
        was = self._done_seen.get(what, False)
        self._done_seen[what] = done
        return done and not was

    def _put(self, widget_id: str, content: str) -> None:
        """Update a top-bar Static only when its text changed (an update redraws it)."""
        if self._shown.get(widget_id) != content:
            self._shown[widget_id] = content
            # the status line may take a second row (a long verdict of the race): a
            # layout pass for it, none for the fixed-size controls
            layout = widget_id == "status-line"
            self.query_one(f"#{widget_id}", Static).update(content, layout=layout)

    def _show_controls(self, view: SessionView) -> None:
        rate_mode = view.rate is not None
        # beside h2 stacks a level is requests in flight: connections, or streams on fewer
        mode = "rate req/s" if rate_mode else "in flight" if view.load_split else "connections"
        workload = self.session.plan.settings.label()
        self._put("mode-label", f"[b]{workload}[/b]\n[dim]{mode}[/]")
        slider = self.query_one("#level", LevelSlider)
        level = view.level
        if level != self._level_shown:
            # the session moved the level (a ramp): show it without echoing a command
            self._level_shown = level
            slider.set_quietly(level)
        if self._shown.get("saturated") != view.saturated:
            self._shown["saturated"] = view.saturated
            self.query_one("#engine-health").set_class(view.saturated, "-saturated")
        self._put("engine-health", engine_health(view))
        self._put("status-line", status_line(view))

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
                series.append(Series(self.panes[pid].name_text, self.pane_colors[pid], curve))
        names = " ".join(f"[{s.color}]━ {escape(s.name)}[/]" for s in series)
        scope = "all stacks" if self.chart_all else "focused stack"
        slo = self.session.slo
        mark = ""
        if slo is not None and slo.latency_target_us:
            chart.set_slo(slo.latency_target_us, slo.quantile, slo.text)
            mark = f"  [{SLO_COLOR}]━ SLO {escape(slo.text)}[/]"
        chart.border_title = f"latency by percentile, {scope} (a: toggle)  {names}{mark}"
        chart.set_series(series)

    # --- focus ------------------------------------------------------------------------

    def on_descendant_focus(self, event: object) -> None:
        focused = self.app.focused
        if isinstance(focused, StackPane) and focused.pane_id != self.focused_id:
            self.focused_id = focused.pane_id
            self.session.note_view("focus", focused.pane_id)
            self._show_chart()

    # --- a replay's view --------------------------------------------------------------

    def _replay_view(self) -> None:
        """Apply the view changes the recording holds (projector mode, the chart, a
        dialog opened or closed, the focused pane): the room's view, replayed."""
        for what, arg in self.session.take_view_events():
            on = arg == "on"
            if what == "projector" and on != self.projector:
                self._set_projector(on)
            elif what == "chart":
                self.chart_wanted = on
                self._relayout()
                self._show_chart()
            elif what == "chart_all" and on != self.chart_all:
                self.chart_all = on
                self._show_chart()
            elif what == "focus" and arg in self.panes:
                self.focused_id = arg
                self._show_chart()
            elif what == "summary":
                self._open_summary()
            elif what == "log" and arg in self.panes:
                self.focused_id = arg
                self._open_log()
            elif what == "evidence" and arg in self.panes:
                self.focused_id = arg
                self._open_evidence()
            elif what == "close" and isinstance(
                self.app.screen, SummaryScreen | LogScreen | EvidenceScreen
            ):
                self.app.pop_screen()

    # --- commands ---------------------------------------------------------------------

    def _replaying(self) -> bool:
        if self.player is not None:
            self.notify("replay: the recording sets the load (space, < >, [ ] to play)")
            return True
        return False

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # replay keys only in a replay; the load's keys only live (False hides a key
        # from the footer: a replay's footer shows the replay's keys); once quitting,
        # nothing but quitting
        if self.session.stopping:
            return action in ("app.quit", "quit")
        if action.startswith("replay_"):
            return self.player is not None
        if action in ("level", "toggle_mode", "ramp", "capacity"):
            return self.player is None
        return True

    # (check_action offers the replay keys only while there is a player)
    async def action_replay_pause(self) -> None:
        if (player := self.player) is not None:
            player.toggle_pause()

    async def action_replay_speed(self, steps: int) -> None:
        if (player := self.player) is not None:
            player.faster(steps)
            self.notify(f"replay ×{player.speed:g}")

    async def action_replay_seek(self, seconds: float) -> None:
        if (player := self.player) is not None:
            await player.seek(player.position + seconds)
            await self.tick()

    @on(LevelSlider.Changed, "#level")
    async def level_changed(self, event: LevelSlider.Changed) -> None:
        if event.value == self._level_shown:
            return
        if self._replaying():
            event.slider.set_quietly(self._level_shown or event.value)
            return
        self._level_shown = event.value
        self.session.stop_ramp()  # a hand on the slider overrides a ramp
        self.session.ranking.stop()  # and a capacity search
        await self.session.set_level(event.value)

    def action_level(self, delta: int) -> None:
        self.query_one("#level", LevelSlider).action_step(delta)

    async def action_toggle_mode(self) -> None:
        if self._replaying():
            return
        level = self.query_one("#level", LevelSlider).value
        self.session.stop_ramp()
        self.session.ranking.stop()
        await self.session.set_rate(None if self.session.rate is not None else float(level))
        self.notify("constant rate (req/s per stack)" if self.session.rate else "closed loop")

    def action_ramp(self) -> None:
        if self._replaying():
            return
        if self.session.ramp is not None:
            self.session.stop_ramp()
            self.notify("ramp stopped")
            return
        self.session.start_ramp()
        self.notify("ramp: stepping the load up; breaking points get marked")

    def action_capacity(self) -> None:
        """`k`: every stack's capacity under the SLO, searched at once; `k` again stops
        it (what it found so far is shown)."""
        if self._replaying():
            return
        if self.session.ranking.search is not None:
            self.session.ranking.stop()
            self.notify("capacity search stopped")
            self._open_capacity()
            return
        if self.session.slo is None:
            # no --slo: ask for one here rather than for a restart
            self.app.push_screen(SloScreen(self.session.set_slo), callback=self._slo_given)
            return
        self._start_capacity()

    def _slo_given(self, text: str | None) -> None:
        if text:  # (Escape: None, the race goes on as it was)
            self._start_capacity()

    def _start_capacity(self) -> None:
        why = self.session.ranking.start()
        if why:
            self.notify(f"no capacity search: {why}", severity="warning")
            return
        slo = self.session.slo
        self.notify(f"capacity search under {slo.text if slo else ''}: every stack at once")

    def _open_capacity(self) -> None:
        slo = self.session.slo
        if isinstance(self.app.screen, CapacityScreen) or slo is None:
            return
        self.app.push_screen(
            CapacityScreen(
                self.session.ranking.ranked(),
                slo.text,
                self.session.ranking.end,
                self.session.synthetic,
                page=partial(summary_page, self.session),
            ),
            callback=self._dialog_closed,
        )

    def action_summary(self) -> None:
        if isinstance(self.app.screen, SummaryScreen):
            return
        self.session.note_view("summary")
        self._open_summary()

    def _dialog_closed(self, _result: object = None) -> None:
        self.session.note_view("close")

    def _open_summary(self) -> None:
        if isinstance(self.app.screen, SummaryScreen):
            return
        self.app.push_screen(
            SummaryScreen(
                self.session.summary(),
                self.session.rate is not None,
                from_ramp=self.session.summary_from_ramp,
                colors=self.pane_colors,
                synthetic=self.session.synthetic,
                ramp_running=self.session.ramp is not None,
                context=summary_context(self.session),
                page=partial(summary_page, self.session),
            ),
            callback=self._dialog_closed,
        )

    def action_log(self) -> None:
        if self.focused_id is not None:
            self.session.note_view("log", self.focused_id)
            self._open_log()

    def _open_log(self) -> None:
        if self.focused_id is None:
            return
        name = self.panes[self.focused_id].name_text
        self.app.push_screen(
            LogScreen(str(name), self.session.log_text(self.focused_id)),
            callback=self._dialog_closed,
        )

    def action_evidence(self) -> None:
        """`w`: the focused stack's evidence; captured now when it has none yet (live)."""
        if self.focused_id is None:
            return
        if self.player is None:
            self.session.capture_evidence(self.focused_id)
        self.session.note_view("evidence", self.focused_id)
        self._open_evidence()

    def _open_evidence(self) -> None:
        if (mid := self.focused_id) is None:
            return
        lines, flame = partial(self.session.evidence_text, mid), partial(self.session.flame, mid)
        self.app.push_screen(
            EvidenceScreen(str(self.panes[mid].name_text), lines, flame),
            callback=self._dialog_closed,
        )

    def _show_then_now(self) -> None:
        """The classic experiment's strip (not in projector mode: the panes' large type
        needs the width)."""
        strip = self.query_one("#thennow", ThenNowStrip)
        wanted = self.then_now_wanted and not self.projector
        strip.show(self.session.then_now() if wanted else None)

    def action_then_now(self) -> None:
        """`n`: show or hide the classic experiment's figures and claims."""
        self.then_now_wanted = not self.then_now_wanted
        self._show_then_now()
        self._relayout()

    def action_chart_all(self) -> None:
        self.chart_all = not self.chart_all
        self.session.note_view("chart_all", "on" if self.chart_all else "off")
        chart = self.query_one("#chart", PercentileChart)
        if not chart.display and not self.projector:
            self.chart_wanted = True
            self._relayout()
        self._show_chart()

    def action_toggle_chart(self) -> None:
        chart = self.query_one("#chart", PercentileChart)
        self.chart_wanted = not chart.display
        self.session.note_view("chart", "on" if self.chart_wanted else "off")
        self._relayout()
        self._show_chart()

    def action_projector(self) -> None:
        """Projector mode: the names, req/s and p99 in large type; failures, waiting,
        RSS and CPU in bold (a recording keeps the switch: a replay shows it too)."""
        self._set_projector(not self.projector)
        self._show_then_now()
        self.session.note_view("projector", "on" if self.projector else "off")
        self.notify("projector mode" if self.projector else "full figures")

    def _set_projector(self, on: bool) -> None:
        self.projector = on
        self.set_class(self.projector, "-projector")
        self.grid.set_projector(self.projector)
        self._relayout()
