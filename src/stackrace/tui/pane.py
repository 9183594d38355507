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

import hashlib
import re
from collections import deque

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from stackrace.engine.model import FAILURE_KINDS, LatencySummary, WindowStats
from stackrace.race.core import StackState
from stackrace.race.session import PaneView
from stackrace.ramp import VERDICT_KINDS
from stackrace.tui.bignum import BigNumber, rows_needed
from stackrace.tui.format import FAILURE_LABELS, fmt_lat, fmt_level, fmt_mb, fmt_rate
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


def three_figures(value: float) -> int:
    """Round to three significant figures: what a room can read, and steadier to redraw."""
    n = round(value)
    if n < 1000:
        return n
    scale = 10 ** (len(str(n)) - 3)
    return round(n / scale) * scale


def plan_rows(height: int, rate_mode: bool, projector: bool = False) -> dict[str, int]:
    """Rows for each part of a pane `height` rows tall inside its border.

    Essentials first: the big figure (at least one row), the latency table (p99), the
    failures and the memory line; then the rest by importance while rows remain; what is
    left goes to the big figure.
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
    latency = 3 if rate_mode else 2
    if projector:
        latency = 0  # p99 gets a big figure of its own
        for part in ("head", "annotation", "spark", "mem-spark"):
            want[part] = 0
    rows = {"latency": latency, "qps": 1}
    left = height - latency - 1
    for part in _OPTIONAL:
        n = want[part]
        if n and left >= n:
            rows[part] = n
            left -= n
        else:
            rows[part] = 0
    if projector:
        # req/s and p99 share what is left, req/s a little more
        extra = max(0, left)
        rows["qps"] += extra - extra // 2
        rows["p99big"] = extra // 2
        if rows["p99big"] < 3 and latency == 0:
            rows["p99big"] = 0
            rows["latency"] = min(2, rows["qps"] - 1) if rows["qps"] > 3 else 0
            rows["qps"] -= rows["latency"]
        return rows
    # the big figure grows with the pane, up to 10 rows (scale 4)
    grow = min(max(0, left), 9)
    rows["qps"] += grow
    rows["p99big"] = 0
    return rows


def pane_widget_id(member_id: str) -> str:
    """The pane's widget id: `pane-NAME` for a plain name (`pane-uvicorn`); a variant
    (`nginx-proxy:backend=gunicorn-sync`) has characters a Textual id may not hold, so
    they become `-` and a short hash of the name keeps two variants apart."""
    if re.fullmatch(r"[A-Za-z0-9_-]+", member_id):
        return f"pane-{member_id}"
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", member_id).strip("-")
    return f"pane-{slug}-{hashlib.sha1(member_id.encode()).hexdigest()[:6]}"


class StackPane(Vertical, can_focus=True):
    """Figures for one stack (or URL target); focus it to chart its latency."""

    def __init__(self, view: PaneView) -> None:
        super().__init__(id=pane_widget_id(view.id), classes="stack-pane")
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
        self.rate_mode = False
        self.projector = False
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

    def compose(self) -> ComposeResult:
        yield Static("", id="head", classes="head")
        yield Static("", id="breaking", classes="breaking")
        yield Static("", id="log", classes="log")
        # the figures sit directly in the pane (no container: every widget costs a frame
        # a little, and a frame passes over every widget in the box it redraws)
        yield BigNumber("0", "req/s", id="qps", classes="fig")
        yield ScaledSparkline(lambda top: f"{fmt_rate(top)} req/s", id="qps-spark", classes="fig")
        yield BigNumber("–", "ms p99", id="p99big", classes="fig")
        yield Static("", id="latency", classes="fig")
        # two lines each (failures and waiting; memory and CPU), for the same reason
        yield Static("", id="failures", classes="fig")
        yield Static("", id="annotation", classes="fig")
        yield Static("", id="memory", classes="fig")
        yield ScaledSparkline(lambda top: f"{fmt_mb(int(top))}", id="mem-spark", classes="fig")

    # --- size -----------------------------------------------------------------------

    def on_resize(self) -> None:
        self.fit()

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
        rows = plan_rows(height, self.rate_mode, self.projector)
        # the big figure takes only the rows its largest scale for this width needs
        width = self.content_size.width
        room = rows["qps"]
        rows["qps"] = rows_needed("req/s", width, room)
        if rows.get("p99big"):
            rows["p99big"] = rows_needed("ms p99", width, rows["p99big"])
        # rows the figure cannot use (the pane's width limits it) go to the annotation
        # (two lines) and taller sparklines, which read better from a distance
        spare = room - rows["qps"]
        for part, most in (("annotation", 1), ("spark", 3), ("mem-spark", 1)):
            if rows.get(part) and spare > 0:
                add = min(most, spare)
                rows[part] += add
                spare -= add
        if rows == self._rows:
            return
        self._rows = rows
        heights = dict(rows)
        heights["failures"] = rows["failures"] + rows["waiting"]
        heights["memory"] = rows["memory"] + rows["cpu"]
        for part, widget_id in (
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
        if self._last_window is not None:
            self._show_latency(self._last_window)

    def line(self, name: str) -> str:
        """The text of one line: failures, waiting, memory or cpu."""
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

    # --- one tick -------------------------------------------------------------------

    def show(
        self, view: PaneView, new_interval: bool, rate_mode: bool, timeout: float, seq: int = 0
    ) -> None:
        """Draw `view`; `new_interval` says whether the engine published new figures.

        Text figures are redrawn on every QPS_EVERY-th interval of the engine (`seq`), the
        same ones for every pane: a frame repaints the box around everything that
        changed, so panes updating on different ticks would cost a frame every tick."""
        self._timeout = timeout
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
        self._flag("-behind", v is None and bool(view.behind))
        if view.state == StackState.CRASHED:
            log = Text("\n".join(view.log_tail) or "(no log)", style="red")
            self._set("log", log, layout=True)
        t = view.target
        if t is not None and new_interval:
            self._show_interval(t.interval, due)
        # the verdict line follows the verdict at once (its colour does: the class)
        # (its kind and level: the figures in it change every interval, redrawn when due)
        shown = (v.kind, v.level) if v is not None else None
        verdict_changed = shown != self._verdict_shown
        self._verdict_shown = shown
        if due or changed or verdict_changed or "head" not in self._texts:
            level = ""
            if t is not None:
                level = fmt_level(t.level, rate_mode)
                level += f" · {t.connections:,} open"
            path = _path_of(view.url)
            self._set("head", f"{self._family}  {level}" + (f"  GET {path}" if path else ""))
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
        else:
            mem.append("RSS –", style="dim")
        if view.baseline is not None and not self.projector:
            mem.append("  before ", style="dim").append(fmt_mb(view.baseline.rss))
        self._lines["memory"] = mem
        cpu = Text(no_wrap=True, overflow="ellipsis")
        cpu.append("CPU ", style="dim")
        cpu.append(f"{res.cpu_percent:.0f} %" if res is not None else "–", style="bold")
        if view.cpu_us_per_request is not None and not self.projector:
            cpu.append(f"  {view.cpu_us_per_request:,.0f} µs/req", style="")
        if res is not None and res.cpu_wait_percent >= 5:
            cpu.append(f"  waited {res.cpu_wait_percent:.0f}% for a core", style="bold yellow")
        if view.external and res is None:
            cpu.append("  (no pid: give --pid)", style="dim")
        self._lines["cpu"] = cpu
        self._set("memory", _two_lines(mem, cpu))

    def _show_verdict(self, view: PaneView, rate_mode: bool) -> None:
        v = view.verdict
        line = Text(no_wrap=True, overflow="ellipsis")
        if v is not None:
            line.append(f"▲ {v.kind.upper()} at {fmt_level(v.level, rate_mode)}", style="bold")
            line.append(f" · {view.proof or v.reason}")
        elif view.behind:
            line.append(f"▼ {view.behind.upper()[:16]}", style="bold")
            line.append(view.behind[16:])
        elif view.target is not None and view.state in (StackState.READY, StackState.WARMING):
            t = view.target
            now = fmt_level(t.level, rate_mode)
            if view.judged and view.compared:
                line.append(f"✓ not broken at {now}", style="green")
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
            self._set("latency", latency_lines(w.latency, w.latency_uncorrected, width))
        if self._rows.get("p99big"):
            value, unit = _p99_figure(w.latency)
            self.query_one("#p99big", BigNumber).update(value, unit)

    def _show_interval(self, w: WindowStats, due: bool = True) -> None:
        """One engine interval. The figures are redrawn every QPS_EVERY intervals (half a
        second): steadier for a room to read, and half the redraws; failures of the
        intervals in between are added up, so none is missed."""
        self._last_window = w
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


def _two_lines(first: Text, second: Text) -> Text:
    """Two lines that never wrap (a wrapped first line would push the second out)."""
    return Text("\n", no_wrap=True, overflow="ellipsis").join([first, second])


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
