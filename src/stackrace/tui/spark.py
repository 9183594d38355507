"""`ScaledSparkline`: a one-line bar chart on a scale shared by every pane, scale shown.

Textual's `Sparkline` scales each widget to its own min and max, so one sync worker's
90 req/s draws as tall as uvicorn's 7,000, and a 0.1 MB wobble fills a memory bar. Here
the bars run from zero to a `top` the race screen sets for all panes at once (the
highest value any pane shows, rounded up by `nice_top`), and the line ends with that
top and its unit ("▕7.0k req/s"), so heights compare across the room.

A pane may set a `mark`: the rate its stack is predicted to start queueing at
(rules/knee.py), drawn before the load reaches it — "◇ knee ~90" after the scale's
label, and, on a chart of two rows or more, a dim dotted line at that height through
the empty cells, so the bars are seen climbing to it and flattening there. A mark above
the scale says so ("◇ knee ~9.0k↑") rather than stretching every pane's scale to it.
Drawn in `render` only, which runs when the data, the top or the mark change (once a
second at most), never on the 4 Hz tick.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

_BARS = " ▁▂▃▄▅▆▇█"


def nice_top(value: float) -> float:
    """The scale's top: the next 1-2-5 step at or above `value` (so it reads as a round
    figure and changes rarely: every change redraws every pane's sparkline)."""
    if value <= 0:
        return 0.0
    exp = 10 ** math.floor(math.log10(value))
    for m in (1, 2, 2.5, 5, 10):
        if m * exp >= value:
            return m * exp
    return 10 * exp


def bars(data: Sequence[float], top: float, width: int, height: int = 1) -> list[str]:
    """The last `width` values as bars from 0 to `top`, `height` rows (top row first);
    a value above 0 shows at least ▁."""
    if width <= 0:
        return [""] * height
    shown = list(data)[-width:]
    eighths = []
    for v in shown:
        if top <= 0 or v <= 0:
            eighths.append(0)
        else:
            eighths.append(min(8 * height, max(1, round(8 * height * v / top))))
    rows = []
    for r in range(height - 1, -1, -1):
        line = "".join(_BARS[min(8, max(0, e - 8 * r))] for e in eighths)
        rows.append(line.rjust(width))
    return rows


_MARK_STYLE = Style(color="yellow", bold=True)
_LINE_STYLE = Style(color="yellow", dim=True)


def mark_row(mark: float | None, top: float, height: int) -> int | None:
    """The row (0: the top one) whose bars reach the mark's height, or None when the
    mark is not on the scale."""
    if mark is None or top <= 0 or mark <= 0 or mark > top:
        return None
    eighths = min(8 * height, max(1, round(8 * height * mark / top)))
    return height - 1 - (eighths - 1) // 8


def mark_text(mark: float | None, top: float, rate: Callable[[float], str], room: int) -> str:
    """The mark's words after the scale's label, as long as `room` allows ("" none)."""
    if mark is None or mark <= 0:
        return ""
    above = "↑" if top > 0 and mark > top else ""
    for said in (f" ◇ knee ~{rate(mark)}{above}", f" ◇{rate(mark)}{above}"):
        if len(said) <= room:
            return said
    return ""


class ScaledSparkline(Widget):
    """Bars from 0 to a shared `top`; the label after them says what top is."""

    DEFAULT_CSS = """
    ScaledSparkline { height: 1; width: 1fr; }
    """

    def __init__(
        self,
        label: Callable[[float], str],
        mark_label: Callable[[float], str] | None = None,
        **kw: object,
    ) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]  # Textual's own (id, classes)
        self.data: list[float] = []
        self.top = 0.0
        self.label = label  # top -> "7.0k req/s"
        self.mark: float | None = None  # the knee predicted, in the data's unit
        self.mark_label = mark_label or (lambda v: f"{v:,.0f}")  # 90 -> "90"

    def set_mark(self, mark: float | None) -> None:
        """The knee predicted (None: none); redrawn only when it changes, in whole units
        (a prediction changes once a level, when a new level's service time is in)."""
        mark = round(mark) if mark is not None else None
        if mark != self.mark:
            self.mark = mark
            self.refresh()

    def set_data(self, data: Sequence[float]) -> None:
        self.data = list(data)
        self.refresh()

    def set_top(self, top: float) -> None:
        if top != self.top:
            self.top = top
            self.refresh()

    def render(self) -> Text:
        width, height = self.content_size.width, max(1, self.content_size.height)
        label = f"▕{self.label(self.top)}" if self.top > 0 else ""
        if len(label) > width // 2:
            label = ""
        marked = mark_text(self.mark, self.top, self.mark_label, width // 2 - len(label))
        at = mark_row(self.mark, self.top, height) if height > 1 else None
        out = Text(no_wrap=True, overflow="crop")
        rows = bars(self.data, self.top, width - len(label) - len(marked), height)
        for i, row in enumerate(rows):
            if i == at:  # the knee's height: dotted through the cells no bar reaches
                for ch in row:
                    out.append("┈", style=_LINE_STYLE) if ch == " " else out.append(ch)
            else:
                out.append(row)
            if i == 0:
                out.append(label, style=Style(dim=True))
                out.append(marked, style=_MARK_STYLE)
            else:
                out.append("▕" if label else "", style=Style(dim=True))
            if i < len(rows) - 1:
                out.append("\n")
        return out
