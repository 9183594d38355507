"""How the race screen is laid out, as pure functions of its size: the panes' grid
(`grid_shape`: how many side by side, and whether the latency chart has room) and,
inside one pane, the rows each part gets (`plan_rows`; `plan_projector` in projector
mode, with the scale of its large figures).

What a pane shows fits its size: the essentials first — req/s, p99, failures and memory
must survive a 100×30 terminal with four panes — then CPU, the verdict line, waiting
clients, the annotation, the sparklines; whatever height is left goes to the big req/s
figure, which grows with it. The screen (stackrace.tui.race) and the pane
(stackrace.tui.pane) apply these plans on every resize.
"""

from __future__ import annotations

import math

from stackrace.tui.bignum import REFERENCE, glyph_rows, glyph_width

CHROME_ROWS = 6  # controls (4), status line, footer
PROJECTOR_CHROME_ROWS = 3  # projector mode: the controls on two rows, no footer
CHART_ROWS = 12
PANE_COMFORT = 16  # rows a pane wants before the latency chart may take any
PANE_MIN_W = 22  # columns a pane needs for req/s, p99 and memory (four at 100 columns)
PANE_WIDE_W = 30  # columns per pane before more than four go side by side


def grid_shape(n: int, width: int, height: int, projector: bool = False) -> tuple[int, int, bool]:
    """(columns, rows, room for the latency chart) for n panes on a width × height screen.

    Side by side while each pane keeps PANE_MIN_W columns (PANE_WIDE_W past four
    panes), else balanced rows; the chart shows only when every row of panes keeps
    PANE_COMFORT rows without it, so it never squeezes memory and CPU out of a pane.
    """
    n = max(1, n)
    avail = height - CHROME_ROWS
    if projector:
        # large type wants wide panes: a near-square grid (2×2 for four stacks), each
        # pane with its name, req/s and p99 in large type (plan_projector)
        cols = max(1, math.ceil(math.sqrt(n)))
        return cols, -(-n // cols), False
    per = PANE_MIN_W if n <= 4 else PANE_WIDE_W
    max_cols = max(1, min(n, width // per))
    rows = -(-n // max_cols)
    cols = -(-n // rows)
    chart = avail - CHART_ROWS >= rows * PANE_COMFORT
    return cols, rows, chart


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
P99_REFERENCE = "888 MS"  # the widest p99 figure, its unit in the same large type
P99_LABEL = "p99"  # written after it, as every big figure has its unit


def plan_projector(width: int, height: int, label: str, cap: int = 8) -> tuple[dict[str, int], int]:
    """Projector mode: rows for the verdict line (bold, always: a room must read what
    the figures mean), the stack's name in large type, req/s, a gap, p99 with its unit
    as large as its digits and its label, and one or two bold lines (failures and
    waiting, CPU and memory); and the figures' scale (the largest that fits, at most
    `cap`).

    The name is drawn a scale below the figures (never under 1): at 200×55, verdict +
    5 + 8 + gap + 8 + two lines. Too little room: the name is one bold line (at 100×30
    with four panes, eleven rows each: verdict + name + 3 + gap + 3 + one line)."""
    lines = 2 if height >= 15 else 1
    budget = height - lines - 1 - 1  # the bold lines, the gap, the verdict

    def fits(text: str, scale: int, extra: int = 0) -> bool:
        return glyph_width(text, scale) + extra <= width

    for scale in range(min(cap, 8), 0, -1):
        if not (fits(REFERENCE, scale, 6) and fits(P99_REFERENCE, scale, len(P99_LABEL) + 1)):
            continue
        figures = 2 * glyph_rows(scale)
        # the name in large type (a scale below the figures, or smaller) when it fits,
        # else as one bold line
        names = [glyph_rows(n) for n in range(max(1, scale - 1), 0, -1) if fits(label, n)]
        for name in [*names, 1]:
            if name + figures <= budget:
                rows = {"verdict": 1, "name": name, "qps": glyph_rows(scale), "gap": 1}
                rows |= {"p99big": glyph_rows(scale), "proj": lines}
                return rows, scale
    # too small for large type everywhere: the name and p99 as bold lines
    qps = max(1, min(3, budget - 2))
    rows = {"verdict": 1, "name": 1, "qps": qps, "gap": 0, "p99big": 1, "proj": lines}
    return rows, 1 if qps >= 3 else 0


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
