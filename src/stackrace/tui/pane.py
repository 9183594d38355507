"""`StackPane`: one running stack's live figures, redrawn from a `PaneView` each tick.

The pane computes nothing about the race: it formats the view it is handed and keeps the
last minute of req/s and memory for its sparklines. Every update is a cheap
`Static.update(layout=False)` and is skipped when the text did not change.

What it shows fits its size (`fit`, on each resize): the essentials first — req/s, p99,
failures and memory must survive a 100×30 terminal with four panes — then CPU, the
verdict line, waiting clients, the annotation, the sparklines; whatever height is left
goes to the big req/s figure, which grows with it. In projector mode (`b`) the pane
shows only req/s and p99 in large type, and waiting, failures, RSS and CPU in bold.
"""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.markup import escape
from textual.message import Message
from textual.widgets import Static

from stackrace.base.slug import slug
from stackrace.engine.model import FAILURE_KINDS, LatencySummary, WindowStats
from stackrace.race.core.state import StackState
from stackrace.race.live.view import PaneView
from stackrace.rules.breaking import VERDICT_KINDS
from stackrace.tui.bignum import (
    REFERENCE,
    BigNumber,
    glyph_rows,
    glyph_width,
    rows_needed,
    scale_for,
)
from stackrace.tui.format import FAILURE_LABELS, fmt_clock, fmt_lat, fmt_level, fmt_mb, fmt_rate
from stackrace.tui.spark import ScaledSparkline

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
# Lines that change colour interval by interval carry it inline: a CSS class change
# would restyle (and repaint) the whole pane every time
_RISING = "bold #ffffff on #b71c1c"
_QUEUED = "#ffb74d"
# which columns survive in a narrow pane, most important first (p99 always)
_KEEP_ORDER = ("p99", "p50", "max", "p90", "p99.9")

# Rows each optional part needs, in the order they are given up when a pane is short
# (the last ones go first). The big figure and the latency table are always there.
_OPTIONAL = (
    "failures",
    "memory",
    "cpu",
    "verdict",
    "waiting",
    "head",
    "annotation",
    "spark",
    "mem-spark",
)


def latency_lines(lat: LatencySummary, unc: LatencySummary | None, width: int = 36) -> Text:
    """A percentile table in `width` columns; fixed columns so figures do not jump.

    In rate mode a second row holds the uncorrected (send-to-response) figures. A pane
    too narrow for all five columns keeps p99, then p50, then max.
    """
    label = 4 if unc is not None else 0
    ncols = max(2, min(5, (width - label) // 7))
    keep = set(_KEEP_ORDER[:ncols])
    names = [n for n in _PERCENTILES if n in keep]
    col = max(6, min(9, (width - label) // len(names)))
    head = Text(" " * label + "".join(f"{n:>{col}}" for n in names), style="dim")
    rows = [head, _latency_row("co" if unc else "", lat, col, names, label, bold=True)]
    if unc is not None:
        rows.append(_latency_row("raw", unc, col, names, label, bold=False))
    return Text("\n", no_wrap=True, overflow="crop").join(rows)


def _latency_row(
    label: str, lat: LatencySummary, col: int, names: list[str], label_w: int, bold: bool
) -> Text:
    t = Text(f"{label:<{label_w}}", style="dim")
    if lat.count == 0:
        t.append("".join(f"{'–':>{col}}" for _ in names), style="dim")
        return t
    values = dict(zip(_PERCENTILES, (lat.p50, lat.p90, lat.p99, lat.p999, lat.max), strict=True))
    for name in names:
        t.append(f"{fmt_lat(values[name]):>{col}}", style="bold" if bold and name == "p99" else "")
    return t


def verdict_line(view: PaneView, rate_mode: bool, width: int, rows: int = 1) -> Text:
    """The verdict and the figure that proves it, never cut before the figure: the
    longest form that fits `rows` lines of `width` — with since when, then without it,
    then the kind, the level and the proof's first figure ("▲ SATURATED c=200 · CPU 98%
    of 1 core") — and only the last form cut at its end."""
    v = view.verdict
    assert v is not None
    level = fmt_level(v.level, rate_mode)
    since = f" since {fmt_clock(view.verdict_since)}" if view.verdict_since is not None else ""
    proof = view.proof or v.reason
    first = proof.split(" · ")[0].split(", ")[0]
    figure = first.split(" (")[0]  # "9.3% failed (timed out)" → "9.3% failed"
    kind = v.kind.upper()
    forms = [
        (f"▲ {kind} at {level}{since}", proof),
        (f"▲ {kind} at {level}", proof),
        (f"▲ {kind} {level}", proof),
        (f"▲ {kind} {level}", first),
        (f"▲ {kind} {level}", figure),
        (f"▲ {kind}", first),
        (f"▲ {kind}", figure),
    ]
    # wrapping breaks at spaces: a few columns of each line may go unused
    room = width * rows - (3 * (rows - 1) if rows > 1 else 0)
    head, tail = next(((h, t) for h, t in forms if len(h) + 3 + len(t) <= room), forms[-1])
    line = Text(no_wrap=rows <= 1, overflow="ellipsis")
    line.append(head, style="bold")
    line.append(f" · {tail}")
    return line


def three_figures(value: float) -> int:
    """Round to three significant figures: what a room can read, and steadier to redraw."""
    n = round(value)
    if n < 1000:
        return n
    scale = 10 ** (len(str(n)) - 3)
    return round(n / scale) * scale


P99_REFERENCE = "888 MS"  # the widest p99 figure, its unit in the same large type


def plan_projector(width: int, height: int, label: str, cap: int = 8) -> tuple[dict[str, int], int]:
    """Projector mode: rows for the stack's name in large type, req/s, a gap, p99 with
    its unit as large as its digits, and one or two bold lines (failures and waiting,
    memory and CPU); and the figures' scale (the largest that fits, at most `cap`).

    The name is drawn a scale below the figures (never under 1): at 100×30 with four
    panes (eleven rows each) that is 3 + 3 + gap + 3 + one line; at 200×55, 5 + 8 + gap
    + 8 + two lines. Too little room even at scale 1: the name is one bold line."""
    lines = 2 if height >= 14 else 1
    budget = height - lines - 1

    def fits(text: str, scale: int, extra: int = 0) -> bool:
        return glyph_width(text, scale) + extra <= width

    for scale in range(min(cap, 8), 0, -1):
        if not (fits(REFERENCE, scale, 6) and fits(P99_REFERENCE, scale)):
            continue
        figures = 2 * glyph_rows(scale)
        # the name in large type (a scale below the figures, or smaller) when it fits,
        # else as one bold line
        names = [glyph_rows(n) for n in range(max(1, scale - 1), 0, -1) if fits(label, n)]
        for name in [*names, 1]:
            if name + figures <= budget:
                rows = {"name": name, "qps": glyph_rows(scale), "gap": 1}
                rows |= {"p99big": glyph_rows(scale), "proj": lines}
                return rows, scale
    # too small for large type everywhere: the name and p99 as bold lines
    qps = max(1, min(3, budget - 2))
    return {"name": 1, "qps": qps, "gap": 0, "p99big": 1, "proj": lines}, 1 if qps >= 3 else 0


def plan_rows(height: int, rate_mode: bool, slo: bool = False) -> dict[str, int]:
    """Rows for each part of a pane `height` rows tall inside its border.

    Essentials first: the big figure (at least one row), the latency table (p99, and
    under --slo the line that says whether this level meets it), the failures and the
    memory line; then the rest by importance while rows remain; what is left goes to
    the big figure.
    """
    want = {
        "failures": 1,
        "memory": 1,
        "cpu": 1,
        "verdict": 1,
        "waiting": 1,
        "head": 1,
        "annotation": 1,
        "spark": 1,
        "mem-spark": 1,
    }
    latency = (3 if rate_mode else 2) + (1 if slo else 0)
    rows = {"latency": latency, "qps": 1}
    left = height - latency - 1
    for part in _OPTIONAL:
        n = want[part]
        if n and left >= n:
            rows[part] = n
            left -= n
        else:
            rows[part] = 0
    # the big figure grows with the pane; what its width does not let it use goes to
    # the verdict, the annotation and the sparklines (StackPane.fit)
    rows["qps"] += max(0, left)
    rows["p99big"] = 0
    return rows


class StackPane(Vertical, can_focus=True):
    """Figures for one stack (or URL target); focus it to chart its latency."""

    def __init__(self, view: PaneView) -> None:
        # the id is a slug of the member's id: a variant's name is user text
        # (`gunicorn-sync:workers=2` is no valid id); the name is only the label
        super().__init__(id=pane_widget_id(view.id), classes="stack-pane")
        self.pane_id = view.id
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
        self._qps_acc: list[float] = []
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
        self._errors_acc = 0
        self._requests_acc = 0
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
        yield BigNumber(self.label, "", id="name-big", classes="fig proj")
        yield Static("", id="head", classes="head")
        yield Static("", id="breaking", classes="breaking")
        yield Static("", id="log", classes="log")
        # the figures sit directly in the pane (no container: every widget costs a frame
        # a little, and a frame passes over every widget in the box it redraws)
        yield BigNumber("0", "req/s", id="qps", classes="fig")
        yield ScaledSparkline(lambda top: f"{fmt_rate(top)} req/s", id="qps-spark", classes="fig")
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
        v = view.verdict
        if v is not None and not self._rows.get("verdict"):
            # no row for the verdict line in a small pane: its kind goes in the border
            subtitle = f"▲ {v.kind.upper()} at {fmt_level(v.level, rate_mode)}"
        if view.wedged and view.state == StackState.READY:
            subtitle = "WEDGED: it answers nothing"
        if view.engine_limited:
            subtitle = f"ENGINE-LIMITED: {view.engine_limit}"
        elif view.refused:
            subtitle = "REFUSED by the engine"
        if view.synthetic:
            subtitle += " · SYNTHETIC"
        self._subtitle(subtitle)
        for state in StackState:
            self._flag(f"-{state.value}", view.state == state)
        if changed and view.state == StackState.CRASHED:
            self.fit()
        self._flag("-broken", v is not None)
        for kind in VERDICT_KINDS:
            self._flag(f"-{kind}", v is not None and v.kind == kind)
        self._flag("-shared", v is None and bool(view.core_share))
        self._flag("-wedged", view.wedged)
        self._flag("-behind", v is None and bool(view.behind))
        if view.state == StackState.CRASHED:
            log = Text("\n".join(view.log_tail) or "(no log)", style="red")
            self._set("log", log, layout=True)
        t = view.target
        if t is not None and new_interval:
            self._show_interval(t.interval, due)
        # the verdict line follows the verdict at once (its colour does: the class)
        # (its kind and level: the figures in it change every interval, redrawn when due)
        shown = (v.kind, v.level, view.core_share) if v is not None else view.core_share
        verdict_changed = shown != self._verdict_shown
        self._verdict_shown = shown
        if due or changed or verdict_changed or "head" not in self._texts:
            level = ""
            if t is not None:
                level = fmt_level(t.level, rate_mode)
                level += f" · {t.connections:,} open"
            path = view.loads or (f"GET {_path_of(view.url)}" if view.url else "")
            self._set("head", f"{self._family}  {level}" + (f"  {path}" if path else ""))
            self._show_verdict(view, rate_mode)
            self._set("annotation", Text(view.annotation, style="italic", overflow="ellipsis"))
        res = view.resources
        if res is not None and new_interval:
            spark = self.query_one("#mem-spark", ScaledSparkline)
            self._sample(self._rss_acc, res.rss, self.rss_history, spark)
        if res is not None and res is self._res_shown:
            return  # memory and CPU change with a new sample only (once a second)
        self._res_shown = res
        mem = Text(no_wrap=True, overflow="ellipsis")
        if res is not None:
            mem.append("RSS ", style="dim").append(f"{fmt_mb(res.rss)}", style="bold")
            if not self.projector:
                mem.append("  USS ", style="dim").append(fmt_mb(res.uss))
        elif view.external:  # a server started by hand, without --pid: nothing to sample
            mem.append("RSS not sampled", style="dim")
        else:
            mem.append("RSS –", style="dim")
        if view.baseline is not None and not self.projector:
            mem.append("  before ", style="dim").append(fmt_mb(view.baseline.rss))
        self._lines["memory"] = mem
        cpu = Text(no_wrap=True, overflow="ellipsis")
        cpu.append("CPU ", style="dim")
        if res is None and view.external:
            cpu.append("not sampled (give --pid)", style="dim")
        else:
            cpu.append(f"{res.cpu_percent:.0f} %" if res is not None else "–", style="bold")
        if view.cpu_us_per_request is not None and not self.projector:
            cpu.append(f"  {view.cpu_us_per_request:,.0f} µs/req", style="")
        if res is not None and res.cpu_wait_percent >= 5:
            cpu.append(f"  waited {res.cpu_wait_percent:.0f}% for a core", style="bold yellow")
        self._lines["cpu"] = cpu
        self._set("memory", _two_lines(mem, cpu))
        self._proj["rss"] = fmt_mb(res.rss) if res is not None else "–"
        self._proj["cpu"] = f"{res.cpu_percent:.0f}%" if res is not None else "–"
        self._show_proj()

    def _show_verdict(self, view: PaneView, rate_mode: bool) -> None:
        v = view.verdict
        line = Text(no_wrap=True, overflow="ellipsis")
        width = self.content_size.width or 40
        if v is not None:
            line = verdict_line(view, rate_mode, width, self._rows.get("verdict", 1))
        elif view.core_share and view.target is not None:
            # no verdict of its own: the race's verdict is the full shared core
            level = fmt_level(view.target.level, rate_mode)
            line.append(f"◆ sharing a full core at {level}", style="bold")
            line.append(f" · {view.core_share}")
            if line.cell_len > width * self._rows.get("verdict", 1):
                line = Text(no_wrap=True, overflow="ellipsis")
                line.append(f"◆ SHARED CORE {level}", style="bold")
                line.append(f" · {view.core_share.split(': ', 1)[-1]}")
            elif self._rows.get("verdict", 1) > 1:
                line.no_wrap = False
        elif view.behind:
            line.append(f"▼ {view.behind.upper()[:16]}", style="bold")
            line.append(view.behind[16:])
        elif view.target is not None and view.state in (StackState.READY, StackState.WARMING):
            t = view.target
            now = fmt_level(t.level, rate_mode)
            if view.judged and view.compared:
                line.append(f"✓ not broken at {now}", style="green")
            elif view.judged and view.level_failed:
                # under the rule's 1 %: no verdict, but "no failures" would not be true
                share = 100 * view.level_failure_ratio
                line.append(f"✓ holding at {now}", style="green")
                line.append(f" · {view.level_failed:,} failed ({share:.2g} %, under 1 %)")
            elif view.judged:
                line.append(f"✓ no failures at {now}", style="green")
                line.append(" · no lower level to compare (r ramps)", style="dim")
            else:
                # a new level is judged after a second of figures: until then, no verdict
                line.append(f"… measuring {now}", style="dim")
            if view.breaking is not None:
                b = view.breaking
                line.append(
                    f" · broke first at {fmt_level(b.level, rate_mode)} ({b.kind})", style="dim"
                )
        self._set("breaking", line)

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
                # one unit for every pane, drawn as large as the digits
                big.reference = P99_REFERENCE
                big.update(p99_in(w.latency, self.p99_unit), "")
            else:
                big.reference = REFERENCE
                value, unit = _p99_figure(w.latency)
                big.update(value, unit)

    def _show_interval(self, w: WindowStats, due: bool = True) -> None:
        """One engine interval. The figures are redrawn every QPS_EVERY intervals (half a
        second): steadier for a room to read, and half the redraws; failures of the
        intervals in between are added up, so none is missed."""
        # HTTP errors and bad bodies are answers, but not throughput: the big figure
        # counts good answers only, and says so when some were not
        good = w.ok / w.seconds if w.seconds else 0.0
        self._qps_acc.append(good)
        self._errors_acc += w.requests - w.ok
        self._requests_acc += w.requests
        for kind, n in w.failures.items():
            self._new_failures[kind] = self._new_failures.get(kind, 0) + n
        self._sample(
            self._rps_acc, good, self.rps_history, self.query_one("#qps-spark", ScaledSparkline)
        )
        if not due:
            return
        # what a re-layout or a unit change redraws: the figures on screen, never a newer
        # interval's (a layout settling between two redraws changed the p99 figure it showed)
        self._shown_window = w
        qps = f"{three_figures(sum(self._qps_acc) / len(self._qps_acc)):,}"
        self._qps_acc.clear()
        errors = self._errors_acc
        # an inline colour, not a CSS class: a class change restyles the whole pane
        self.errors = errors > 0.01 * max(1, self._requests_acc)
        self._errors_acc = self._requests_acc = 0
        big = self.query_one("#qps", BigNumber)
        big.set_alert(self.errors)
        big.update(qps, "req/s ok" if errors else "req/s")
        self._show_latency(w)
        self._show_failures(w, self._new_failures)
        self._new_failures = {}

    def _show_failures(self, w: WindowStats, new: dict[str, int]) -> None:
        rising = False
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append("failed ", style="dim")
        for kind in FAILURE_KINDS:
            now = new.get(kind, 0)
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
            # nothing failed *yet*: with clients waiting that is not health, and the
            # timeout says how long they may wait before they count as failed
            line.append("none yet" if w.stale else "none", style="" if w.stale else "green")
        self.rising = rising
        if rising:
            line.stylize(_RISING)
        self._lines["failures"] = line
        wait = Text(no_wrap=True, overflow="ellipsis")
        if w.waiting:
            wait.append("waiting ", style="dim")
            wait.append(f"{w.waiting:,}", style="bold")
            if w.oldest_wait_us:
                wait.append(" · ", style="dim")
                wait.append(fmt_lat(w.oldest_wait_us), style="bold" if w.stale else "")
                wait.append(" old", style="dim")
            if w.connecting:
                # the server's accept queue is full: these never got a byte out
                wait.append(" · ", style="dim")
                wait.append(f"{w.connecting:,} connecting", style="bold")
        else:
            wait.append("waiting 0", style="dim")
        wait.append(f" · timeout {self._timeout:g}s", style="dim")
        if w.stale:
            wait.stylize(_QUEUED)
        self._lines["waiting"] = wait
        self._set("failures", _two_lines(line, wait))
        self._proj["failed"] = f"{sum(self.failures_seen.values()):,}"
        self._proj["waiting"] = f"{w.waiting:,}"
        self._show_proj()

    def _show_proj(self) -> None:
        """Projector mode's bold lines: failures and waiting, then memory and CPU (on
        one line when the pane has one)."""
        if not self._rows.get("proj"):
            return
        p = self._proj
        first = f"failed {p['failed']}  waiting {p['waiting']}"
        second = f"RSS {p['rss']}  CPU {p['cpu']}"
        text = f"{first}\n{second}" if self._rows["proj"] > 1 else f"{first}  {second}"
        self._set("proj", Text(text, style="bold", no_wrap=True, overflow="ellipsis"))


def title_for(name: str, member_id: str, room: int) -> str:
    """The longest of a pane's names that fits `room` columns: its name, its id, or its
    id cut in the middle so that a variant's settings (the end) stay readable."""
    if room <= 0 or len(name) <= room:
        return name
    if len(member_id) <= room:
        return member_id
    if room < 8:
        return member_id[:room]
    head = max(4, room // 3)  # the start names the server; the end holds the settings
    return member_id[:head] + "…" + member_id[-(room - 1 - head) :]


_SLO_STYLE = {True: "bold green", False: "bold white on #b71c1c", None: "dim"}


def slo_line(text: str, meets: bool | None) -> Text:
    """The SLO line: green while the level meets it, red when it misses, dim while the
    level has too few answers to say."""
    return Text(text, style=_SLO_STYLE[meets], no_wrap=True, overflow="ellipsis")


def pane_widget_id(member_id: str) -> str:
    """The Textual id of a member's pane (tests and screenshots query it)."""
    return f"pane-{slug(member_id)}"


def _two_lines(first: Text, second: Text) -> Text:
    """Two lines that never wrap (a wrapped first line would push the second out)."""
    return Text("\n", no_wrap=True, overflow="ellipsis").join([first, second])


def p99_in(lat: LatencySummary, unit: str) -> str:
    """p99 in a given unit, with the unit, for large type: "157 MS", "2.5 S"."""
    if lat.count == 0:
        return f"– {unit}"
    value = lat.p99 / (1e6 if unit == "S" else 1e3)
    digits = f"{value:.2f}" if value < 1 else f"{value:.1f}" if value < 10 else f"{value:.0f}"
    return f"{digits} {unit}"


def _p99_figure(lat: LatencySummary) -> tuple[str, str]:
    """p99 for a big figure: digits and a unit ("124", "ms p99")."""
    if lat.count == 0:
        return "–", "ms p99"
    us = lat.p99
    if us >= 1_000_000:
        return f"{us / 1e6:.1f}", "s p99"
    ms = us / 1000
    return (f"{ms:.1f}" if ms < 10 else f"{ms:.0f}"), "ms p99"


def _path_of(url: str) -> str:
    from urllib.parse import urlsplit

    if not url:
        return ""
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")
