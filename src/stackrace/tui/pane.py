"""`StackPane`: one running stack's live figures, redrawn from a `PaneView` each tick.

The pane computes nothing about the race: it formats the view it is handed and keeps the
last minute of req/s and memory for its sparklines. Every update is a cheap
`Static.update(layout=False)` and is skipped when the text did not change.

One pane, one story: the verdict line is the level's judgment (stackrace.rules.level,
handed over in the view), and every figure under it — the big req/s (goodput: answers
that count), the latency table, the failures and the waiting clients — is read from
the same window the judgment was made on: the level's running totals (the last
interval only while the level is too young to judge). Only the sparklines follow the
intervals, and the big req/s of a WEDGED pane: what it serves now (0), not the level's
average of what it served before it stopped. A tick, "keeping up" or a green "none"
shows only when the judgment is green.

What it shows fits its size (`fit`, on each resize, by stackrace.tui.layout's plans);
what each line says is stackrace.tui.pane_text's. In projector mode (`b`) the pane shows
the verdict line in bold, req/s and p99 (labelled) in large type, and failures, waiting,
CPU and RSS in bold.
"""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Static

from stackrace.base.printable import textual_markup as escape
from stackrace.base.slug import slug
from stackrace.engine.model import WindowStats
from stackrace.race.core.state import StackState
from stackrace.race.live.view import PaneView
from stackrace.rules.level import KEEPING_UP, MEASURING, STATES, WEDGED, Judgment
from stackrace.tui.bignum import REFERENCE, BigNumber, rows_needed, scale_for
from stackrace.tui.format import fmt_level, fmt_mb, fmt_rate
from stackrace.tui.layout import P99_LABEL, P99_REFERENCE, plan_projector, plan_rows
from stackrace.tui.pane_text import (
    annotation_text,
    cpu_line,
    failures_line,
    head_line,
    latency_lines,
    memory_line,
    p99_figure,
    p99_in,
    path_of,
    projector_lines,
    short_verdict,
    shown_window,
    slo_line,
    state_class,
    three_figures,
    title_for,
    two_lines,
    verdict_row,
    waiting_line,
)
from stackrace.tui.spark import ScaledSparkline

HISTORY = 60  # sparkline points: one minute, one per second
PER_POINT = 4  # intervals (of 250 ms) averaged into one sparkline point
QPS_EVERY = 2  # intervals averaged into the big QPS figure

# each state's word in the border: its own, a crash in capitals, a start under way
_STATE_LABELS = {s: s.value for s in StackState} | {StackState.STARTING: "starting…"}
_STATE_LABELS[StackState.CRASHED] = "CRASHED"


class StackPane(Vertical, can_focus=True):
    """Figures for one stack (or URL target); focus it to chart its latency."""

    def __init__(self, view: PaneView, color: str = "") -> None:
        # the id is a slug of the member's id: a variant's name is user text
        # (`gunicorn-sync:workers=2` is no valid id); the name is only the label
        super().__init__(id=pane_widget_id(view.id), classes="stack-pane")
        self.pane_id = view.id
        self.color = color  # the name in large type, in the pane's colour
        self.name_text = view.name  # the stack's name as text; the title is markup: escaped
        self.border_title = escape(view.name)
        self.rps_history: deque[float] = deque(maxlen=HISTORY)
        self.rss_history: deque[float] = deque(maxlen=HISTORY)
        self.failures_seen: dict[str, int] = {}
        self._texts: dict[str, object] = {}
        self._family = view.family
        self._shown_window: WindowStats | None = None
        self._classes_on: dict[str, bool] = {}
        self._rps_acc: list[float] = []
        self._rss_acc: list[float] = []
        self.rate_mode = False
        self.projector = False
        self.label = view.name.upper()  # the name in large type (the screen shortens it)
        self.external = view.external
        self.scale_cap = 8  # the race screen's: every pane's figures at one scale
        self.shared_box: tuple[int, int] | None = None  # projector: the smallest pane
        self.fig_scale = 8  # the scale this pane's box allows its figures
        self.p99_unit = "MS"  # in projector mode one unit for every pane (the screen's)
        self._proj = {"failed": "0", "waiting": "0", "rss": "–", "cpu": "–"}
        self._rows: dict[str, int] = {}
        self._timeout = 10.0
        self.rising = False  # failures rose in the last half second
        self._new_failures: dict[str, int] = {}
        self._res_shown: object = None
        self._state: StackState | None = None
        self._lines: dict[str, Text] = {}  # the logical lines, by name (tests read them)
        self._seq = 0
        self._drawn_at = -1  # seq // QPS_EVERY at the last redraw of the figures
        self._verdict_shown: object = None
        self._point_at = -1  # seq // PER_POINT at the last sparkline point
        self.errors = False  # answers were HTTP errors or bad bodies
        # --slo: the line under the latency table, and whether it meets (None: too few
        # answers yet to say); the session judges, the pane only shows
        self.slo_text = ""
        self.slo_meets: bool | None = None

    def compose(self) -> ComposeResult:
        # projector mode only: the stack's name in large type
        name = BigNumber(self.label, "", id="name-big", classes="fig proj")
        name.styles.color = self.color or None
        yield name
        yield Static("", id="head", classes="head")
        yield Static("", id="breaking", classes="breaking")
        yield Static("", id="log", classes="log")
        # the figures sit directly in the pane (no container: every widget costs a frame
        # a little, and a frame passes over every widget in the box it redraws)
        yield BigNumber("0", "req/s", id="qps", classes="fig")
        yield ScaledSparkline(
            lambda top: f"{fmt_rate(top)} req/s", fmt_rate, id="qps-spark", classes="fig"
        )
        yield Static("", id="gap", classes="fig proj")
        yield BigNumber("–", "ms p99", id="p99big", classes="fig")
        yield Static("", id="latency", classes="fig")
        # two lines each (failures and waiting; memory and CPU), for the same reason
        yield Static("", id="failures", classes="fig")
        yield Static("", id="annotation", classes="fig")
        yield Static("", id="memory", classes="fig")
        yield ScaledSparkline(lambda top: f"{fmt_mb(int(top))}", id="mem-spark", classes="fig")
        # projector mode: failures and waiting, memory and CPU, bold, one or two lines
        yield Static("", id="proj", classes="fig proj")

    # --- size -----------------------------------------------------------------------

    class Resized(Message):
        """A pane's size changed: the race screen plans every pane's digits again (they
        share one size)."""

    def on_resize(self) -> None:
        if not self.app.is_running or not self.is_attached:  # closing: parts may be gone
            return
        self.fit_title()
        self.fit()
        self.post_message(self.Resized())

    def fit_title(self) -> None:
        """The border's title in the width it has: the stack's name, else its id (a
        variant's settings are what tells two panes apart: `gunicorn-sync:workers=4`
        must not be cut to "gunicorn (sync worker) (worke…")."""
        room = self.size.width - 4  # the two corners and a space either side of the title
        self.border_title = escape(title_for(self.name_text, self.pane_id, room))

    def fit(self) -> None:
        """Give each part its rows for the pane's height (on resize and mode changes)."""
        height = self.content_size.height
        if height <= 0:
            return
        if self._crashed:
            # the log takes the pane: no figures
            for widget in self.query(".fig"):
                widget.display = False
            self._rows = {}
            return
        width = self.content_size.width
        if self.projector:
            # every pane planned for the smallest box among them (the race screen's):
            # one digit size everywhere, though grid rows differ by a row
            box_w, box_h = self.shared_box or (width, height)
            rows, self.fig_scale = plan_projector(
                min(width, box_w), min(height, box_h), self.label, self.scale_cap
            )
            self._apply_rows(rows)
            for widget_id in ("name-big", "qps", "p99big"):
                self.query_one(f"#{widget_id}", BigNumber).set_max_scale(
                    max(1, self.fig_scale - 1) if widget_id == "name-big" else self.fig_scale
                )
            return
        rows = plan_rows(height, self.rate_mode, slo=bool(self.slo_text))
        # the big figure takes only the rows its largest scale for this width needs,
        # at most the scale every pane shares (the race screen's cap)
        room = rows["qps"]
        self.fig_scale = scale_for("req/s", width, room)
        rows["qps"] = rows_needed("req/s", width, room, self.scale_cap)
        self.query_one("#qps", BigNumber).set_max_scale(self.scale_cap)
        # rows the figure cannot use (the pane's width limits it) go to the verdict and
        # the annotation (two lines each: the proof is never cut) and taller
        # sparklines, which read better from a distance
        spare = room - rows["qps"]
        for part, most in (("verdict", 1), ("annotation", 1), ("spark", 7), ("mem-spark", 3)):
            if rows.get(part) and spare > 0:
                add = min(most, spare)
                rows[part] += add
                spare -= add
        if rows.get("spark") and spare > 0:
            rows["spark"] += spare  # the rest: the req/s sparkline, the taller the better
        self._apply_rows(rows)

    def _apply_rows(self, rows: dict[str, int]) -> None:
        if rows == self._rows:
            return
        self._rows = rows
        heights = dict(rows)
        heights["failures"] = rows.get("failures", 0) + rows.get("waiting", 0)
        heights["memory"] = rows.get("memory", 0) + rows.get("cpu", 0)
        for part, widget_id in (
            ("name", "name-big"),
            ("gap", "gap"),
            ("proj", "proj"),
            ("head", "head"),
            ("verdict", "breaking"),
            ("qps", "qps"),
            ("spark", "qps-spark"),
            ("p99big", "p99big"),
            ("latency", "latency"),
            ("failures", "failures"),
            ("annotation", "annotation"),
            ("memory", "memory"),
            ("mem-spark", "mem-spark"),
        ):
            widget = self.query_one(f"#{widget_id}")
            n = heights.get(part, 0)
            widget.display = n > 0
            if n:
                widget.styles.height = n
        if self._shown_window is not None:
            self._show_latency(self._shown_window)

    def line(self, name: str) -> str:
        """The text of one line: failures, waiting, memory, cpu or slo."""
        t = self._lines.get(name)
        return t.plain if t is not None else ""

    @property
    def _crashed(self) -> bool:
        return bool(self._classes_on.get("-crashed"))

    # --- helpers --------------------------------------------------------------------

    def _set(self, widget_id: str, content: str | Text, layout: bool = False) -> None:
        """Update a Static only when its content changed.

        Figures keep their line count (the pane fixes each part's height), so they skip
        the layout pass; the crash log changes height and asks for one.
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

    def _sample(
        self, acc: list[float], value: float, history: deque[float], spark: ScaledSparkline
    ) -> None:
        """Average PER_POINT intervals into one sparkline point: a 1 Hz redraw, not 4 Hz,
        on the same engine intervals for every pane (see `show`)."""
        acc.append(value)
        if self._seq // PER_POINT != self._point_at:
            self._point_at = self._seq // PER_POINT
            history.append(sum(acc) / len(acc))
            acc.clear()
            spark.set_data(history)

    def set_tops(self, rps_top: float, rss_top: float) -> None:
        """The scale every pane's sparklines share (set by the race screen)."""
        self.query_one("#qps-spark", ScaledSparkline).set_top(rps_top)
        self.query_one("#mem-spark", ScaledSparkline).set_top(rss_top)

    def set_projector(self, on: bool) -> None:
        if on != self.projector:
            self.projector = on
            self._flag("-projector", on)
            self.fit()

    def set_label(self, label: str) -> None:
        """The name in large type (the race screen makes it short and distinct)."""
        if label != self.label:
            self.label = label
            self.query_one("#name-big", BigNumber).update(label, "")
            self.fit()

    def set_scale_cap(self, cap: int) -> None:
        if cap != self.scale_cap:
            self.scale_cap = cap
            self._rows = {}
            self.fit()

    def set_p99_unit(self, unit: str) -> None:
        """Projector mode: p99 in this unit ("MS" or "S"), the one every pane uses."""
        if unit != self.p99_unit:
            self.p99_unit = unit
            if self._shown_window is not None:
                self._show_latency(self._shown_window)

    # --- one tick -------------------------------------------------------------------

    def show(
        self, view: PaneView, new_interval: bool, rate_mode: bool, timeout: float, seq: int = 0
    ) -> None:
        """Draw `view`; `new_interval` says whether the engine published new figures.

        Text figures are redrawn on every QPS_EVERY-th interval of the engine (`seq`), the
        same ones for every pane: a frame repaints the box around everything that
        changed, so panes updating on different ticks would cost a frame every tick."""
        self._timeout = timeout
        if view.slo_text != self.slo_text or view.slo_meets != self.slo_meets:
            refit = bool(view.slo_text) != bool(self.slo_text)
            self.slo_text, self.slo_meets = view.slo_text, view.slo_meets
            self._lines["slo"] = slo_line(self.slo_text, self.slo_meets)
            if refit:
                self.fit()
            elif self._shown_window is not None and not new_interval:
                self._show_latency(self._shown_window)
        if rate_mode != self.rate_mode:
            self.rate_mode = rate_mode
            self._flag("-rate", rate_mode)
            self.fit()
        # due when the engine's interval count crossed a multiple of QPS_EVERY since the
        # last redraw: every other interval live, every one in a replay played faster
        due = new_interval and seq // QPS_EVERY != self._drawn_at
        if due:
            self._drawn_at = seq // QPS_EVERY
        self._seq = seq
        changed = view.state != self._state
        self._state = view.state
        # the border is redrawn with the whole pane: its text changes with the state and
        # the verdict only, set once a tick
        subtitle = _STATE_LABELS[view.state]
        j = view.judgment
        if (
            j is not None
            and j.state not in (KEEPING_UP, MEASURING)
            and not self._rows.get("verdict")
        ):
            # no row for the verdict line in a small pane: its state goes in the border
            subtitle = short_verdict(j, rate_mode)
        if view.refused:
            subtitle = "REFUSED by the engine"
        if view.synthetic:
            subtitle += " · SYNTHETIC"
        self._subtitle(subtitle)
        for state in StackState:
            self._flag(f"-{state.value}", view.state == state)
        if changed and view.state == StackState.CRASHED:
            self.fit()
        self._flag("-broken", j is not None and j.broken)
        for kind in STATES:
            self._flag(state_class(kind), j is not None and j.state == kind)
        self._flag("-behind", (j is None or not j.broken) and bool(view.behind))
        if view.state == StackState.CRASHED:
            log = Text("\n".join(view.log_tail) or "(no log)", style="red")
            self._set("log", log, layout=True)
        t = view.target
        window = shown_window(view)
        if t is not None and window is not None and new_interval:
            self._show_interval(t.interval, window, view.judgment, due)
        # the verdict line follows the judgment at once (its colour does: the class)
        # (its state and level: the figures in it change every interval, redrawn when due)
        shown = (j.state, j.level) if j is not None else None
        verdict_changed = shown != self._verdict_shown
        self._verdict_shown = shown
        if due or changed or verdict_changed or "head" not in self._texts:
            level = f"{fmt_level(t.level, rate_mode)} · {t.connections:,} open" if t else ""
            path = view.loads or (f"GET {path_of(view.url)}" if view.url else "")
            width = self.content_size.width or 40
            self._set("head", head_line(self._family, level, view.protocol, path, width))
            self._show_verdict(view, rate_mode)
            spark = self.query_one("#qps-spark", ScaledSparkline)  # the knee, before it comes
            spark.set_mark(view.knee.rate if view.knee is not None else None)
            rows = self._rows.get("annotation", 1) or 1
            said = annotation_text(view, self.content_size.width or 40, rows)
            self._set("annotation", Text(said, style="italic", overflow="ellipsis"))
            if self._proj.get("why", "") != view.cause_kind:
                self._proj["why"] = view.cause_kind
                self._show_proj()
        res = view.resources
        if res is not None and new_interval:
            spark = self.query_one("#mem-spark", ScaledSparkline)
            self._sample(self._rss_acc, res.rss, self.rss_history, spark)
        if res is not None and res is self._res_shown:
            return  # memory and CPU change with a new sample only (once a second)
        self._res_shown = res
        mem = memory_line(view, self.projector, self.content_size.width)
        self._lines["memory"] = mem
        cpu = cpu_line(view, self.projector, self.content_size.width)
        self._lines["cpu"] = cpu
        self._set("memory", two_lines(mem, cpu))
        self._proj["rss"] = fmt_mb(res.rss) if res is not None else "–"
        self._proj["cpu"] = f"{res.cpu_percent:.0f}%" if res is not None else "–"
        self._show_proj()

    def _show_verdict(self, view: PaneView, rate_mode: bool) -> None:
        width = self.content_size.width or 40
        self._set("breaking", verdict_row(view, rate_mode, width, self._rows.get("verdict", 1)))

    def _show_latency(self, w: WindowStats) -> None:
        width = self.content_size.width or 36  # 0 before the first layout
        if self._rows.get("latency"):
            table = latency_lines(w.latency, w.latency_uncorrected, width)
            if self.slo_text:
                table.append("\n")
                table.append_text(slo_line(self.slo_text, self.slo_meets))
            self._set("latency", table)
        if self._rows.get("p99big"):
            big = self.query_one("#p99big", BigNumber)
            if self.projector:
                # one unit for every pane, drawn as large as the digits, and its label
                big.reference = P99_REFERENCE
                big.update(p99_in(w.latency, self.p99_unit), P99_LABEL)
            else:
                big.reference = REFERENCE
                value, unit = p99_figure(w.latency)
                big.update(value, unit)

    def _show_interval(
        self,
        interval: WindowStats,
        w: WindowStats,
        judgment: Judgment | None = None,
        due: bool = True,
    ) -> None:
        """One engine interval: the sparkline takes its goodput; the figures — from `w`,
        the window the judgment was made on — are redrawn every QPS_EVERY intervals
        (half a second: steadier for a room to read, and half the redraws), with the
        failures of the intervals in between added up as what is new, so none is
        missed."""
        # HTTP errors and bad bodies are answers, but not throughput: every figure
        # counts good answers only (goodput), and says so when some were not
        good = interval.ok / interval.seconds if interval.seconds else 0.0
        for kind, n in interval.failures.items():
            self._new_failures[kind] = self._new_failures.get(kind, 0) + n
        self._sample(
            self._rps_acc, good, self.rps_history, self.query_one("#qps-spark", ScaledSparkline)
        )
        if not due:
            return
        # what a re-layout or a unit change redraws: the figures on screen, never a newer
        # window's (a layout settling between two redraws changed the p99 figure it showed)
        self._shown_window = w
        # wedged: what it serves now (0), not the level's average before it stopped
        wedged = judgment is not None and judgment.state == WEDGED
        qps = f"{three_figures(good if wedged else w.goodput):,}"
        errors = w.requests - w.ok
        # an inline colour, not a CSS class: a class change restyles the whole pane
        self.errors = errors > 0.01 * max(1, w.requests)
        big = self.query_one("#qps", BigNumber)
        big.set_alert(self.errors)
        big.update(qps, "req/s ok" if errors else "req/s")
        self._show_latency(w)
        self._show_failures(w, self._new_failures, judgment)
        self._new_failures = {}

    def _show_failures(
        self, w: WindowStats, new: dict[str, int], judgment: Judgment | None = None
    ) -> None:
        """The window's failures by kind, what is new since the last redraw, and the
        clients still waiting; "none" is green only when the judgment is."""
        self.failures_seen = {k: n for k, n in w.failures.items() if n}
        line, self.rising = failures_line(w, new, judgment, self.content_size.width)
        self._lines["failures"] = line
        wait = waiting_line(w, self._timeout, self.content_size.width)
        self._lines["waiting"] = wait
        self._set("failures", two_lines(line, wait))
        self._proj["failed"] = f"{sum(self.failures_seen.values()):,}"
        self._proj["waiting"] = f"{w.waiting:,}"
        self._show_proj()

    def _show_proj(self) -> None:
        """Projector mode's bold lines (pane_text.projector_lines), where it has rows."""
        if not self._rows.get("proj"):
            return
        width = self.content_size.width or 80
        self._set("proj", projector_lines(self._proj, self._rows["proj"], width))


def pane_widget_id(member_id: str) -> str:
    """The Textual id of a member's pane (tests and screenshots query it)."""
    return f"pane-{slug(member_id)}"
