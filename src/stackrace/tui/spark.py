"""`ScaledSparkline`: a one-line bar chart on a scale shared by every pane, scale shown.

Textual's `Sparkline` scales each widget to its own min and max, so one sync worker's
90 req/s draws as tall as uvicorn's 7,000, and a 0.1 MB wobble fills a memory bar. Here
the bars run from zero to a `top` the race screen sets for all panes at once (the
highest value any pane shows, rounded up by `nice_top`), and the line ends with that
top and its unit ("▕7.0k req/s"), so heights compare across the room.
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


class ScaledSparkline(Widget):
    """Bars from 0 to a shared `top`; the label after them says what top is."""

    DEFAULT_CSS = """
    ScaledSparkline { height: 1; width: 1fr; }
    """

    def __init__(self, label: Callable[[float], str], **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]  # Textual's own (id, classes)
        self.data: list[float] = []
        self.top = 0.0
        self.label = label  # top -> "7.0k req/s"

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
        out = Text(no_wrap=True, overflow="crop")
        rows = bars(self.data, self.top, width - len(label), height)
        for i, row in enumerate(rows):
            out.append(row)
            if i == 0:
                out.append(label, style=Style(dim=True))
            else:
                out.append("▕" if label else "", style=Style(dim=True))
            if i < len(rows) - 1:
                out.append("\n")
        return out
