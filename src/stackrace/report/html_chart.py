"""Small SVG charts of a run's series, built as text: the HTML report's drawings.

One chart is one stack and one figure over the run's time (report/html.py lays them
side by side, every chart of a row on the same time and value axes). Lines are SVG
paths; a gap in the data (a second with no answer has no latency) is a gap in the line,
never a zero drawn as "fast". Latency is drawn on a log scale (a p99.9 of 2 s and a p50
of 1 ms share a chart), everything else linear from 0.

**Drawing, not data.** A line holds at most `MAX_POINTS` points: longer ones are
reduced by largest-triangle-three-buckets (Steinarsson 2013), which keeps the peaks a
reader looks for (a mean per bucket would flatten a one-second spike). The run file
keeps every second; only the picture is reduced.

**Hover.** Each chart carries its scale (`data-x0`…`data-y1`, `data-log`) and each
line its name and unit, so the page's one small script turns the drawn points back into
values at the pointer (html.py's HOVER_JS): the values exist once, as the drawing.

Every piece of text reaching the SVG goes through `esc` (printable.html: quotes and
control characters too): a stack's name, a failure kind and a unit are all outside
text here.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from stackrace.base import printable

MAX_POINTS = 200  # points of one drawn line: more than a chart's width in columns

W, H = 600, 170  # the viewBox
LEFT, RIGHT, TOP, BOTTOM = 52, 8, 16, 20

Point = tuple[float, float]


def esc(text: object) -> str:
    """Any figure or name for the page: base/printable.py's HTML sink (control characters
    shown as text, markup escaped), the one every HTML writer uses."""
    return printable.html(str(text))


def lttb(points: Sequence[Point], threshold: int) -> list[Point]:
    """Largest-triangle-three-buckets: `threshold` points of the line that keep its shape
    (first and last kept; from each bucket the point making the largest triangle with
    the point kept before and the next bucket's mean)."""
    n = len(points)
    if threshold >= n or threshold < 3:
        return list(points)
    out = [points[0]]
    every = (n - 2) / (threshold - 2)
    a = 0
    for i in range(threshold - 2):
        start = int(i * every) + 1
        end = int((i + 1) * every) + 1
        nxt_end = min(int((i + 2) * every) + 1, n)
        nxt = points[end:nxt_end] or [points[-1]]
        avg_x = sum(p[0] for p in nxt) / len(nxt)
        avg_y = sum(p[1] for p in nxt) / len(nxt)
        ax, ay = points[a]
        best, best_area = start, -1.0
        for j in range(start, min(end, n - 1)):
            x, y = points[j]
            area = abs((ax - avg_x) * (y - ay) - (ax - x) * (avg_y - ay))
            if area > best_area:
                best, best_area = j, area
        out.append(points[best])
        a = best
    out.append(points[-1])
    return out


def segments(t: Sequence[float], values: Sequence[float | None]) -> list[list[Point]]:
    """The line's unbroken runs: a None (no figure that second) ends one."""
    runs: list[list[Point]] = []
    cur: list[Point] = []
    for x, y in zip(t, values, strict=False):
        if y is None:
            if cur:
                runs.append(cur)
            cur = []
        else:
            cur.append((x, y))
    if cur:
        runs.append(cur)
    return runs


def reduce(runs: list[list[Point]], max_points: int = MAX_POINTS) -> list[list[Point]]:
    """The runs with at most about `max_points` points in all, each its share."""
    total = sum(len(r) for r in runs)
    if total <= max_points:
        return runs
    return [lttb(r, max(3, round(max_points * len(r) / total))) for r in runs]


@dataclass
class Line:
    name: str  # shown in the legend and the hover ("p99", "timeout")
    values: list[float | None]
    css: str  # the class that colours it (html.py's CSS)
    dashed: bool = False  # the baseline run, in a comparison


@dataclass
class Band:
    start: float
    end: float
    css: str  # the verdict's class
    label: str = ""


@dataclass
class Chart:
    """One stack's figure over time; `x1`, `y1` shared with the other charts of its row."""

    title: str
    unit: str  # "req/s", "ms", "%", "MB", ""
    t: list[float]
    lines: list[Line]
    x1: float = 1.0
    y1: float = 1.0
    log: bool = False
    ymin: float = 0.0  # log scale: the row's smallest value (0: this chart's own)
    steps: list[tuple[float, str]] = field(default_factory=list)  # (t, label): level changes
    bands: list[Band] = field(default_factory=list)
    marks: list[tuple[float, str]] = field(default_factory=list)  # (t, label): breaking point
    t_other: list[float] | None = None  # the dashed lines' own times (the baseline run)
    step_labels: bool = True  # the levels named above the steps (the first row's charts)


def share_axes(charts: Sequence[Chart]) -> None:
    """One row of charts on the same axes: the longest time, the largest value (and
    for a log scale the smallest), so side by side they compare at a glance."""
    x1 = max((t for c in charts for t in (*c.t, *(c.t_other or ()))), default=1.0)
    vals = [v for c in charts for line in c.lines for v in line.values if v is not None]
    for c in charts:
        c.x1 = x1 or 1.0
        c.y1 = max(vals, default=1.0) or 1.0
        c.ymin = min((v for v in vals if v > 0), default=1.0)


def nice(v: float) -> float:
    """A round axis top at or above v (1, 2, 5 × 10^k)."""
    if v <= 0:
        return 1.0
    p = 10.0 ** math.floor(math.log10(v))
    for m in (1, 2, 5, 10):
        if v <= m * p:
            return m * p
    return 10 * p


def svg(chart: Chart) -> str:
    """The chart as an inline <svg> element."""
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM
    x1 = chart.x1 or 1.0
    if chart.log:
        y0 = 10 ** math.floor(math.log10(max(chart.ymin or _smallest(chart), 1e-3)))
        y1 = 10 ** math.ceil(math.log10(max(chart.y1, y0 * 10)))
    else:
        y0, y1 = 0.0, nice(chart.y1)

    def px(x: float) -> float:
        return LEFT + pw * x / x1

    def py(v: float) -> float:
        if chart.log:
            v = max(v, y0)
            f = (math.log10(v) - math.log10(y0)) / (math.log10(y1) - math.log10(y0))
        else:
            f = (v - y0) / (y1 - y0) if y1 > y0 else 0.0
        return TOP + ph * (1 - f)

    out = [
        f'<svg class="chart" viewBox="0 0 {W} {H}" role="img" aria-label="{esc(chart.title)}"'
        f' data-x0="0" data-x1="{x1:g}" data-y0="{y0:g}" data-y1="{y1:g}"'
        f' data-log="{1 if chart.log else 0}" data-unit="{esc(chart.unit)}"'
        f' data-l="{LEFT}" data-r="{W - RIGHT}" data-t="{TOP}" data-b="{H - BOTTOM}">'
    ]
    for b in chart.bands:
        a, z = px(b.start), px(min(b.end, x1))
        if z > a:
            out.append(
                f'<rect class="band {esc(b.css)}" x="{a:.1f}" y="{TOP}" width="{z - a:.1f}"'
                f' height="{ph}">'
                + (f"<title>{esc(b.label)}</title>" if chart.step_labels else "")
                + "</rect>"
            )
    # axes: a few value ticks, time ticks in seconds
    ticks = _log_ticks(y0, y1) if chart.log else [y1 * k / 4 for k in range(5)]
    for v in ticks:
        y = py(v)
        out.append(f'<line class="grid" x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>')
        out.append(
            f'<text class="tick" x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">'
            f"{esc(_fmt(v))}</text>"
        )
    for s in _time_ticks(x1):
        out.append(
            f'<text class="tick" x="{px(s):.1f}" y="{H - 6}" text-anchor="middle">'
            f"{_clock(s)}</text>"
        )
    if chart.steps:  # one path for every step: a long ramp has dozens
        d = "".join(f"M{px(t):.1f},{TOP}V{TOP + ph}" for t, _ in chart.steps)
        out.append(f'<path class="step" d="{d}"/>')
    for t, label in chart.steps if chart.step_labels else ():
        out.append(f'<text class="steplabel" x="{px(t) + 2:.1f}" y="{TOP - 4}">{esc(label)}</text>')
    for line in chart.lines:
        times = chart.t_other if line.dashed and chart.t_other is not None else chart.t
        runs = reduce(segments(times, line.values))
        d = "".join(_path([(px(x), py(y)) for x, y in run]) for run in runs if run)
        if not d:
            continue
        dash = " dashed" if line.dashed else ""
        out.append(
            f'<path class="line {esc(line.css)}{dash}" data-name="{esc(line.name)}" d="{d}"/>'
        )
    for t, label in chart.marks:
        x = px(t)
        out.append(
            f'<line class="mark" x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{TOP + ph}">'
            f"<title>{esc(label)}</title></line>"
            f'<text class="marklabel" x="{x + 3:.1f}" y="{TOP + 11}">{esc(label)}</text>'
        )
    out.append(
        f'<line class="cursor" x1="0" x2="0" y1="{TOP}" y2="{TOP + ph}" visibility="hidden"/>'
    )
    out.append("</svg>")
    return "".join(out)


def _path(points: list[Point]) -> str:
    """One unbroken run as path data: the first point absolute, then each step from the
    one before in tenths of a unit ("l2.2,-.3 2.3,0"): half the bytes of absolute pairs.
    Steps are taken between rounded positions, so rounding never accumulates."""
    q = [(round(x * 10), round(y * 10)) for x, y in points]
    out = f"M{_tenths(q[0][0])},{_tenths(q[0][1])}"
    if len(q) > 1:
        out += "l" + " ".join(
            f"{_tenths(b[0] - a[0])},{_tenths(b[1] - a[1])}" for a, b in itertools.pairwise(q)
        )
    return out


def _tenths(n: int) -> str:
    text = f"{n / 10:g}"
    return text.replace("0.", ".", 1) if text.startswith(("0.", "-0.")) else text


def _smallest(chart: Chart) -> float:
    vals = [v for line in chart.lines for v in line.values if v]
    return min(vals) if vals else 1.0


def _log_ticks(y0: float, y1: float) -> list[float]:
    out = []
    v = y0
    while v <= y1 * 1.0001:
        out.append(v)
        v *= 10
    return out


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if v >= 1e6:
        return f"{v / 1e6:g}M"
    if v >= 1e3:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def _time_ticks(x1: float) -> list[float]:
    step = max(1.0, nice(x1 / 6))  # whole seconds: a 2 s run is not labelled 0s, 0s, 1s
    return [k * step for k in range(int(x1 // step) + 1)]


def _clock(s: float) -> str:
    n = round(s)
    return f"{n // 60}:{n % 60:02d}" if n >= 60 else f"{n}s"
