"""A braille canvas for small line charts, drawn into Rich `Text` (no Textual here).

Each terminal cell holds a 2×4 grid of braille dots, so a 60×10 cell chart has
120×40 dots. Series are drawn in order; a cell takes the colour of the last series
that touched it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from rich.text import Text

# dot bit for (x, y) inside a cell, y counted from the top
_DOTS = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))


class BrailleCanvas:
    def __init__(self, width: int, height: int) -> None:
        self.width = max(1, width)
        self.height = max(1, height)
        self.bits = [[0] * self.width for _ in range(self.height)]
        self.colors: list[list[str | None]] = [[None] * self.width for _ in range(self.height)]

    @property
    def dots_x(self) -> int:
        return self.width * 2

    @property
    def dots_y(self) -> int:
        return self.height * 4

    def dot(self, x: int, y: int, color: str) -> None:
        """Set the dot at (x, y), y = 0 at the bottom."""
        if not (0 <= x < self.dots_x and 0 <= y < self.dots_y):
            return
        row = self.height - 1 - y // 4
        sub_y = 3 - y % 4
        col = x // 2
        self.bits[row][col] |= _DOTS[sub_y][x % 2]
        self.colors[row][col] = color

    def line(self, x0: int, y0: int, x1: int, y1: int, color: str) -> None:
        steps = max(abs(x1 - x0), abs(y1 - y0), 1)
        for i in range(steps + 1):
            self.dot(round(x0 + (x1 - x0) * i / steps), round(y0 + (y1 - y0) * i / steps), color)

    def polyline(self, points: Sequence[tuple[int, int]], color: str) -> None:
        for (x0, y0), (x1, y1) in itertools.pairwise(points):
            self.line(x0, y0, x1, y1, color)
        if len(points) == 1:
            self.dot(*points[0], color)

    def rows(self) -> list[Text]:
        out = []
        for bits, colors in zip(self.bits, self.colors, strict=True):
            t = Text(no_wrap=True)
            for b, c in zip(bits, colors, strict=True):
                t.append(chr(0x2800 + b) if b else " ", style=c or "")
            out.append(t)
        return out


def log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks between lo and hi (both > 0), at most about five of them."""
    if lo <= 0 or hi <= lo:
        return [lo]
    ticks = []
    for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10**e
            if lo <= v <= hi:
                ticks.append(v)
    while len(ticks) > 5:
        ticks = ticks[::2]
    return ticks
