"""`BigNumber`: a figure drawn in block digits that grow with the space they are given.

Textual's `Digits` are always three rows tall; on a 220×60 projector that leaves most of
a pane empty. Here each glyph is a 3×5 pixel bitmap drawn with half blocks (two pixels
a cell, so pixels are about square), scaled by the largest whole factor that fits the
widget: 3 rows at scale 1, 5 at 2, 8 at 3, 10 at 4. The unit is written after the last
row ("req/s", "ms p99"): a figure on a screen never goes without its unit. Too narrow
for the digits and the unit, the figure is shortened (7,000 → 7.0k); too narrow for
that, it is one line of bold text.

The widget never asks for a layout pass (its size comes from the pane), and a render is
cached by (value, unit, size), so an unchanged figure costs nothing.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

_GLYPHS: dict[str, tuple[str, ...]] = {
    "0": ("###", "#.#", "#.#", "#.#", "###"),
    "1": (".#.", "##.", ".#.", ".#.", "###"),
    "2": ("###", "..#", "###", "#..", "###"),
    "3": ("###", "..#", "###", "..#", "###"),
    "4": ("#.#", "#.#", "###", "..#", "..#"),
    "5": ("###", "#..", "###", "..#", "###"),
    "6": ("###", "#..", "###", "#.#", "###"),
    "7": ("###", "..#", "..#", "..#", "..#"),
    "8": ("###", "#.#", "###", "#.#", "###"),
    "9": ("###", "#.#", "###", "..#", "###"),
    "k": ("#..", "#.#", "##.", "#.#", "#.#"),
    ",": (".", ".", ".", "#", "#"),
    ".": (".", ".", ".", ".", "#"),
    "–": ("...", "...", "###", "...", "..."),
    "-": ("...", "...", "###", "...", "..."),
    " ": (".", ".", ".", ".", "."),
    # letters, for a stack's name and a unit in large type (projector mode): capitals
    # only, three pixels wide where three read, wider where they do not (M, N, W)
    "A": ("###", "#.#", "###", "#.#", "#.#"),
    "B": ("##.", "#.#", "##.", "#.#", "##."),
    "C": ("###", "#..", "#..", "#..", "###"),
    "D": ("##.", "#.#", "#.#", "#.#", "##."),
    "E": ("###", "#..", "##.", "#..", "###"),
    "F": ("###", "#..", "##.", "#..", "#.."),
    "G": ("###", "#..", "#.#", "#.#", "###"),
    "H": ("#.#", "#.#", "###", "#.#", "#.#"),
    "I": ("###", ".#.", ".#.", ".#.", "###"),
    "J": ("..#", "..#", "..#", "#.#", "###"),
    "K": ("#.#", "#.#", "##.", "#.#", "#.#"),
    "L": ("#..", "#..", "#..", "#..", "###"),
    "M": ("#...#", "##.##", "#.#.#", "#...#", "#...#"),
    "N": ("#..#", "##.#", "#.##", "#..#", "#..#"),
    "O": ("###", "#.#", "#.#", "#.#", "###"),
    "P": ("###", "#.#", "###", "#..", "#.."),
    "Q": ("###", "#.#", "#.#", "###", "..#"),
    "R": ("##.", "#.#", "##.", "#.#", "#.#"),
    "S": ("###", "#..", "###", "..#", "###"),
    "T": ("###", ".#.", ".#.", ".#.", ".#."),
    "U": ("#.#", "#.#", "#.#", "#.#", "###"),
    "V": ("#.#", "#.#", "#.#", "#.#", ".#."),
    "W": ("#...#", "#...#", "#.#.#", "##.##", "#...#"),
    "X": ("#.#", "#.#", ".#.", "#.#", "#.#"),
    "Y": ("#.#", "#.#", ".#.", ".#.", ".#."),
    "Z": ("###", "..#", ".#.", "#..", "###"),
    "/": ("..#", "..#", ".#.", "#..", "#.."),
    "=": ("...", "###", "...", "###", "..."),
    ":": (".", "#", ".", "#", "."),
}
_HALF = {(False, False): " ", (True, False): "▀", (False, True): "▄", (True, True): "█"}


def glyph_width(text: str, scale: int) -> int:
    """Columns the block figure takes: each glyph plus one pixel of gap, scaled."""
    px = sum(len(_GLYPHS.get(ch, _GLYPHS[" "])[0]) + 1 for ch in text) - 1
    return max(0, px * scale)


def glyph_rows(scale: int) -> int:
    return (5 * scale + 1) // 2


def shorten(value: str) -> str:
    """7,000 → 7.0k, 14,300 → 14.3k, 250,000 → 250k: fewer glyphs for a narrow pane."""
    digits = value.replace(",", "")
    if not digits.isdigit() or int(digits) < 1000:
        return value
    n = int(digits) / 1000
    return f"{n:.1f}k" if n < 100 else f"{n:.0f}k"


def block_lines(text: str, scale: int) -> list[str]:
    """The figure as rows of half-block characters."""
    pixel_rows: list[list[bool]] = [[] for _ in range(5 * scale)]
    for i, ch in enumerate(text):
        glyph = _GLYPHS.get(ch, _GLYPHS[" "])
        for y, row in enumerate(glyph):
            bits = [c == "#" for c in row]
            if i:
                bits = [False, *bits]  # one pixel between glyphs
            wide = [b for b in bits for _ in range(scale)]
            for k in range(scale):
                pixel_rows[y * scale + k].extend(wide)
    if len(pixel_rows) % 2:
        pixel_rows.append([False] * len(pixel_rows[0]))
    out = []
    for top, bottom in zip(pixel_rows[::2], pixel_rows[1::2], strict=True):
        out.append("".join(_HALF[(a, b)] for a, b in zip(top, bottom, strict=True)))
    return out


# Scales are chosen for a figure at least this wide, so panes side by side draw their
# figures at the same size whether they read 90 or 7,000.
REFERENCE = "8,888"


def layout(
    value: str, unit: str, width: int, height: int, max_scale: int = 8, reference: str = REFERENCE
) -> tuple[str, int, bool]:
    """The text to draw, its scale (0: one line of plain text) and whether the unit goes
    on a line of its own below (when that allows a larger scale), for width × height;
    never above `max_scale` (panes side by side share one)."""
    need_unit = len(unit) + 1 if unit else 0
    for text, ref in ((value, reference), (shorten(value), "8.8k")):
        sized = text if glyph_width(text, 1) >= glyph_width(ref, 1) else ref
        for scale in range(max(1, max_scale), 0, -1):
            px = glyph_width(sized, scale)
            if glyph_rows(scale) <= height and px + need_unit <= width:
                return text, scale, False
            if unit and glyph_rows(scale) + 1 <= height and px <= width and scale > 1:
                return text, scale, True
    return value, 0, False


def rows_needed(
    unit: str, width: int, height: int, max_scale: int = 8, reference: str = REFERENCE
) -> int:
    """Rows a figure of the reference width takes at the largest scale that fits."""
    _text, scale, below = layout(reference, unit, width, height, max_scale, reference)
    if scale == 0:
        return 1
    return glyph_rows(scale) + (1 if below else 0)


def scale_for(unit: str, width: int, height: int, reference: str = REFERENCE) -> int:
    """The largest scale a figure of the reference width gets in width × height."""
    return layout(reference, unit, width, height, reference=reference)[1]


class BigNumber(Widget):
    """A figure in block digits with its unit; `update(value)` redraws only on a change."""

    DEFAULT_CSS = """
    BigNumber { height: 3; width: 1fr; }
    """

    def __init__(self, value: str = "0", unit: str = "", **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]  # Textual's own (id, classes)
        self.value = value
        self.unit = unit
        self.alert = False  # drawn in red: the figure is not what it seems (errors)
        self.max_scale = 8  # the race screen caps it: every pane's digits one size
        self.reference = REFERENCE  # the width its scale is chosen for (a name: itself)
        self._cache: tuple[tuple[object, ...], Text] | None = None

    def set_max_scale(self, scale: int) -> None:
        if scale != self.max_scale:
            self.max_scale = scale
            self.refresh()

    def set_alert(self, on: bool) -> None:
        if on != self.alert:
            self.alert = on
            self.refresh()

    def update(self, value: str, unit: str | None = None) -> None:
        """Show a new figure (no layout pass: the pane fixes this widget's size)."""
        if value == self.value and (unit is None or unit == self.unit):
            return
        self.value = value
        if unit is not None:
            self.unit = unit
        self.refresh()

    def render(self) -> Text:
        width, height = self.content_size.width, self.content_size.height
        style = self.rich_style
        key = (self.value, self.unit, width, height, style, self.alert, self.max_scale)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        reference = self.reference or self.value
        text, scale, below = layout(self.value, self.unit, width, height, self.max_scale, reference)
        out = Text(no_wrap=True, overflow="crop", style="bold #ef5350" if self.alert else "")
        if scale == 0:
            out.append(text, style=Style(bold=True))
            if self.unit:
                out.append(f" {self.unit}", style=Style(dim=True))
        else:
            lines = block_lines(text, scale)
            for i, line in enumerate(lines):
                out.append(line)
                if i == len(lines) - 1 and self.unit:
                    out.append("\n" if below else " ")
                    out.append(self.unit, style=Style(bold=True))
                if i < len(lines) - 1:
                    out.append("\n")
        self._cache = (key, out)
        return out
