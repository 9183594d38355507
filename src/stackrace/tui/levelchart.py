"""`LevelChart`: req/s and p99 against the load level, every stack on one chart.

After a ramp this is the story in one picture: the left half shows where each stack's
req/s stops growing, the right half (log scale) where its p99 takes off. The x axis is
the level on a log scale (1, 10, 100, 1k…), the same for both halves, and each stack
keeps its pane's colour; a breaking point is marked with ▲ on its req/s line, and the
knee predicted before the load reached it (rules/knee.py) with ◇ where the prediction put
it: the load and the req/s a fixed pool must start queueing at.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.text import Text
from textual.widget import Widget

from stackrace.tui.format import fmt_lat, fmt_rate
from stackrace.tui.plot import BrailleCanvas, log_ticks

_AXIS_W = 7


@dataclass(frozen=True)
class LevelSeries:
    name: str
    color: str
    points: list[tuple[int, float, int]]  # (level, req/s, p99 µs), ascending level
    broke_at: int | None = None
    knee: tuple[float, float] | None = None  # predicted (level, req/s) it queues from


def _x(level: int, lo: int, hi: int, dots: int) -> int:
    if hi <= lo:
        return 0
    return round(math.log10(level / lo) / math.log10(hi / lo) * (dots - 1))


class LevelChart(Widget):
    DEFAULT_CSS = """
    LevelChart { height: 14; }
    """

    def __init__(self, series: list[LevelSeries], rate_mode: bool = False, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]  # Textual's own (id, classes)
        self.series = series
        self.rate_mode = rate_mode

    def render(self) -> Text:
        width, height = self.content_size.width, self.content_size.height
        pts = [p for s in self.series for p in s.points]
        if not pts or height < 4:
            return Text("no levels measured yet (r runs a ramp)", style="dim")
        half = (width - 2) // 2
        left = self._panel(half, height, rps=True)
        right = self._panel(width - 2 - half, height, rps=False)
        out = Text(no_wrap=True, overflow="crop")
        for i, (a, b) in enumerate(zip(left, right, strict=True)):
            out.append_text(a)
            out.append("  ")
            out.append_text(b)
            if i < len(left) - 1:
                out.append("\n")
        return out

    def _panel(self, width: int, height: int, rps: bool) -> list[Text]:
        plot_w, plot_h = max(4, width - _AXIS_W - 1), max(2, height - 2)
        levels = [lv for s in self.series for lv, _, _ in s.points]
        lo, hi = min(levels), max(levels)
        values = [(r if rps else p) for s in self.series for _, r, p in s.points]
        values = [v for v in values if v > 0]
        top = max(values, default=1.0)
        low = min(values, default=1.0)
        canvas = BrailleCanvas(plot_w, plot_h)
        if not rps:
            low, top = low / 1.2, top * 1.2
            if top <= low:
                top = low * 10
        span = math.log10(top / low) if not rps else 0.0

        def y_of(v: float) -> int:
            if rps:
                return round(v / (top * 1.05) * (canvas.dots_y - 1))
            return round(math.log10(max(v, low) / low) / span * (canvas.dots_y - 1))

        marks: list[tuple[int, int, str]] = []
        for s in self.series:
            line = [
                (_x(lv, lo, hi, canvas.dots_x), y_of(r if rps else p))
                for lv, r, p in s.points
                if (r if rps else p) > 0
            ]
            canvas.polyline(line, s.color)
            if rps and s.broke_at is not None:
                for lv, r, _ in s.points:
                    if lv == s.broke_at:
                        col = _x(lv, lo, hi, canvas.dots_x) // 2
                        row = plot_h - 1 - y_of(r) // 4
                        marks.append((max(0, min(plot_h - 1, row)), col, s.color))
            if rps and s.knee is not None:
                level, rate = s.knee
                col = _x(max(lo, min(hi, round(level))), lo, hi, canvas.dots_x) // 2
                row = plot_h - 1 - min(canvas.dots_y - 1, y_of(rate)) // 4
                marks.append((max(0, min(plot_h - 1, row)), col, f"◇{s.color}"))
        rows = canvas.rows()
        for row, col, color in marks:
            t = rows[row]
            glyph, color = ("◇", color[1:]) if color.startswith("◇") else ("▲", color)
            if col < len(t.plain):
                rows[row] = t[:col] + Text(glyph, style=f"bold {color}") + t[col + 1 :]
        labels = [""] * plot_h
        if rps:
            for i in range(0, plot_h, max(1, plot_h // 3)):
                v = (plot_h - 1 - i) / max(1, plot_h - 1) * top * 1.05
                labels[i] = fmt_rate(v)
        else:
            for tick in log_ticks(low, top):
                row = plot_h - 1 - round(math.log10(tick / low) / span * (plot_h - 1))
                if 0 <= row < plot_h and not labels[row]:
                    labels[row] = fmt_lat(tick)
        title = "req/s (linear)" if rps else "p99 latency (log)"
        out = [Text(f"{'':>{_AXIS_W}} {title}", style="bold", no_wrap=True)]
        for label, text_row in zip(labels, rows, strict=True):
            t = Text(no_wrap=True, overflow="crop")
            t.append(f"{label:>{_AXIS_W}}", style="dim")
            t.append("┤" if label else "│", style="dim")
            t.append_text(text_row)
            out.append(t)
        axis = [" "] * (plot_w + 1)
        for tick in [
            lv
            for lv in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
            if lo <= lv <= hi
        ]:
            col = _x(tick, lo, hi, plot_w)
            text = f"{tick // 1000}k" if tick >= 1000 else str(tick)
            pos = min(col, plot_w + 1 - len(text))
            if all(c == " " for c in axis[max(0, pos - 1) : pos + len(text) + 1]):
                axis[pos : pos + len(text)] = text
        unit = "req/s asked" if self.rate_mode else "connections"
        foot = Text(" " * _AXIS_W + "└" + "".join(axis), style="dim", no_wrap=True)
        out.append(foot)
        out[0].append(f"  vs {unit}", style="dim")
        return out[:height]
