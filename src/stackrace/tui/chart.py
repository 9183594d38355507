"""`PercentileChart`: latency by percentile, log-log, one line per stack.

The x axis is HdrHistogram's percentile scale (50%, 90%, 99%, 99.9%, 99.99% evenly
spaced), the y axis latency on a log scale, so a stack whose tail blows up is obvious.
With an SLO (`--slo 'p99<50ms'`) its target is a red line across the chart, and a tick
on the axis below marks its percentile: a curve above the line right of the tick
misses it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.text import Text
from textual.widget import Widget

from stackrace.tui.format import fmt_lat
from stackrace.tui.plot import BrailleCanvas, log_ticks

NINES = 4.0  # the x axis runs to 99.99%
_X_LABELS = ((0.0, "0%"), (1.0, "90%"), (2.0, "99%"), (3.0, "99.9%"), (4.0, "99.99%"))
_AXIS_W = 8  # columns for the latency labels
SLO_COLOR = "#ef5350"


def curve_points(n: int = 48) -> list[float]:
    """Percentiles (0-100) evenly spaced on the nines scale, for `percentile_curve`."""
    return [100.0 * (1.0 - 10 ** (-NINES * i / (n - 1))) for i in range(n)]


def _nines(percentile: float) -> float:
    if percentile >= 100.0:
        return NINES
    return min(NINES, -math.log10(1.0 - percentile / 100.0))


@dataclass(frozen=True)
class Series:
    name: str
    color: str
    curve: list[tuple[float, int]]  # (percentile, microseconds)


class PercentileChart(Widget):
    DEFAULT_CSS = """
    PercentileChart { height: 12; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.series: list[Series] = []
        self.slo_us: float | None = None  # the SLO's latency target: a line across
        self.slo_percentile: float | None = None  # its percentile (99.0): a tick below
        self.slo_label = ""

    def set_series(self, series: list[Series]) -> None:
        self.series = series
        self.refresh()

    def set_slo(self, target_us: float | None, quantile: float | None, label: str = "") -> None:
        """The SLO's line (None: no line)."""
        pct = quantile * 100 if quantile is not None else None
        if (target_us, pct, label) != (self.slo_us, self.slo_percentile, self.slo_label):
            self.slo_us, self.slo_percentile, self.slo_label = target_us, pct, label
            self.refresh()

    def render(self) -> Text:
        width, height = self.content_size.width, self.content_size.height
        plot_w, plot_h = max(4, width - _AXIS_W - 1), max(2, height - 1)
        values = [us for s in self.series for _, us in s.curve if us > 0]
        if not values:
            return Text("no latency data yet", style="dim")
        if self.slo_us:  # the line is always in view, however far below or above it
            values.append(int(self.slo_us))
        lo: float = min(values)
        hi: float = max(values)
        if hi <= lo:
            lo, hi = lo / 1.5, hi * 1.5
        lo, hi = lo / 1.1, hi * 1.1
        canvas = BrailleCanvas(plot_w, plot_h)
        span = math.log10(hi / lo)

        def y_of(us: float) -> int:
            return round((math.log10(max(us, lo) / lo) / span) * (canvas.dots_y - 1))

        slo_row = None
        if self.slo_us:
            y = y_of(self.slo_us)
            canvas.polyline([(0, y), (canvas.dots_x - 1, y)], SLO_COLOR)
            slo_row = plot_h - 1 - round((math.log10(self.slo_us / lo) / span) * (plot_h - 1))
        for s in self.series:
            pts = [
                (round(_nines(p) / NINES * (canvas.dots_x - 1)), y_of(us))
                for p, us in s.curve
                if us > 0
            ]
            canvas.polyline(pts, s.color)
        rows = canvas.rows()
        labels = [""] * plot_h
        for tick in log_ticks(lo, hi):
            row = plot_h - 1 - round((math.log10(tick / lo) / span) * (plot_h - 1))
            if 0 <= row < plot_h and not labels[row]:
                labels[row] = fmt_lat(tick)
        if slo_row is not None and 0 <= slo_row < plot_h:
            labels[slo_row] = "SLO"
        out = Text(no_wrap=True, overflow="crop")
        for n, (label, line) in enumerate(zip(labels, rows, strict=True)):
            style = f"bold {SLO_COLOR}" if n == slo_row else "dim"
            out.append(f"{label:>{_AXIS_W}}", style=style)
            out.append("┤" if label else "│", style=style)
            out.append_text(line)
            out.append("\n")
        axis = [" "] * (plot_w + 1)
        for x, text in _X_LABELS:
            col = round(x / NINES * (plot_w - 1))
            pos = min(col, plot_w + 1 - len(text))
            axis[pos : pos + len(text)] = text
        out.append(" " * _AXIS_W + "└", style="dim")
        mark = None
        if self.slo_us and self.slo_percentile is not None:
            mark = min(plot_w - 1, round(_nines(self.slo_percentile) / NINES * (plot_w - 1)))
        # the SLO's percentile: a ▲ on the axis, or its label in red where one is there
        marked: set[int] = set()
        if mark is not None:
            marked = {mark}
            if axis[mark] != " ":
                lo_col = hi_col = mark
                while lo_col > 0 and axis[lo_col - 1] != " ":
                    lo_col -= 1
                while hi_col < len(axis) - 1 and axis[hi_col + 1] != " ":
                    hi_col += 1
                marked = set(range(lo_col, hi_col + 1))
            else:
                axis[mark] = "▲"
        start = len(out.plain)
        out.append("".join(axis), style="dim")
        if marked:
            out.stylize(f"bold {SLO_COLOR}", start + min(marked), start + max(marked) + 1)
        return out
