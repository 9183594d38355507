"""Capacities under an SLO, ranked: the table `bench --capacity`, `tune` and the app's
summary print (one ranking, one order: highest req/s first; a stack that cannot meet
the SLO at any load last, with why)."""

from __future__ import annotations

from stackrace.base import printable
from stackrace.base.printable import markdown as md
from stackrace.report.schema import CAPACITY_INTERRUPTED, CapacityResult, StackResult
from stackrace.settings.units import fmt_bytes


def rank_key(c: CapacityResult) -> tuple[bool, float]:
    """The order of every capacity ranking: the highest req/s under the SLO first, a
    stack that cannot meet it at any load (or whose search was interrupted) last."""
    return (not c.claimed, -(c.capacity or 0.0) if c.claimed else 0.0)


def ranked(stacks: list[StackResult]) -> list[StackResult]:
    """Stacks with a capacity, the highest req/s under the SLO first."""
    found = [st for st in stacks if st.capacity is not None]
    return sorted(found, key=lambda st: rank_key(st.capacity))  # type: ignore[arg-type]


def at(c: CapacityResult, load: float | None) -> str:
    if load is None:
        return "-"
    return f"c={load:g}" if c.mode == "concurrency" else f"{load:,.0f} req/s"


def row(c: CapacityResult) -> list[str]:
    """capacity (req/s: with rounds, their 90 % interval; one round, its repeats' spread
    in a row, which is no interval), at (the load), breaks at, memory, CPU per request."""
    if c.stopped == CAPACITY_INTERRUPTED:
        cap = "interrupted: no capacity"
    elif c.load is None:
        cap = "cannot meet"
    elif len(c.rounds) >= 2 and c.lo is not None and c.hi is not None:
        cap = f"{c.capacity or 0:,.0f} req/s ({c.lo:,.0f}–{c.hi:,.0f}, {len(c.rounds)} rounds)"
    else:
        # one search is one round: its repeats in a row are no interval (issue 47)
        margin = f" (in a row ±{c.margin * 100:.0f} %)" if c.margin is not None else ""
        cap = f"{c.capacity or 0:,.0f} req/s{margin}"
        if c.unstable:
            cap += f" (unstable {at(c, c.unstable[0])}–{at(c, c.unstable[1])})"
    cpu = f"{c.cpu_us_per_request:,.0f} µs" if c.cpu_us_per_request is not None else "-"
    return [cap, at(c, c.load), at(c, c.breaks_at), fmt_bytes(c.rss) if c.rss else "-", cpu]


HEADER = ["#", "stack", "capacity under the SLO", "at", "breaks at", "memory", "CPU/req"]


def table_lines(stacks: list[StackResult]) -> list[str]:
    """A plain-text table (every column padded), best first."""
    rows = [
        [str(n), st.name, *row(st.capacity)]  # type: ignore[arg-type]
        for n, st in enumerate(ranked(stacks), 1)
    ]
    widths = [max(len(r[k]) for r in [HEADER, *rows]) for k in range(len(HEADER))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
        for r in [HEADER, *rows]
    ]


def markdown(stacks: list[StackResult], slo: str) -> str:
    # a run file's text: every cell escaped for Markdown (stackrace.base.printable)
    lines = [f"Capacity under the SLO ({md(slo)}), best first:", ""]
    lines.append("| " + " | ".join(HEADER) + " |")
    lines.append("|" + "---|" * len(HEADER))
    for n, st in enumerate(ranked(stacks), 1):
        cells = [str(n), st.name, *row(st.capacity)]  # type: ignore[arg-type]
        lines.append("| " + " | ".join(md(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def _axes(name: str) -> dict[str, str]:
    """A candidate's tunables from its variant name ("gthread:workers=3,threads=8")."""
    _, _, variant = name.partition(":")
    pairs = (p.partition("=") for p in variant.split(",") if "=" in p)
    return {k: v for k, _, v in pairs}


def grid(stacks: list[StackResult]) -> tuple[list[int], list[int], dict[tuple[int, int], float]]:
    """Capacity by (workers, threads): the best over any other tunable of a cell, 0 for
    a candidate that cannot meet the SLO. Empty when the candidates vary neither."""
    cells: dict[tuple[int, int], float] = {}
    for st in stacks:
        c = st.capacity
        if c is None:
            continue
        a = _axes(st.name)
        try:
            key = (int(a.get("workers", 0)), int(a.get("threads", 0)))
        except ValueError:
            continue
        cells[key] = max(cells.get(key, 0.0), (c.capacity or 0.0) if c.load is not None else 0.0)
    workers = sorted({w for w, _ in cells})
    threads = sorted({t for _, t in cells})
    if len(workers) * len(threads) <= 1:
        return [], [], {}
    return workers, threads, cells


def svg(stacks: list[StackResult], slo: str) -> str:
    """Capacity under the SLO against workers × threads (a heatmap: one column per
    worker count, one row per thread count, each cell its req/s, the darker the more,
    the winner outlined), then a bar per candidate in the order measured (every
    tunable, and a sweep that varied neither workers nor threads)."""
    rows = [st for st in stacks if st.capacity is not None]
    top = max((st.capacity.capacity or 0.0 for st in rows), default=0.0) or 1.0  # type: ignore[union-attr]
    best = ranked(rows)[0] if rows else None
    workers, threads, cells = grid(rows)
    cell_w, cell_h, gx, gy = 74, 26, 110, 56
    heat_h = (gy + len(threads) * cell_h + 40) if cells else 0
    bar_h, gap, left, width = 18, 6, 330, 420
    bars_y = 32 + heat_h
    height = bars_y + 8 + len(rows) * (bar_h + gap)
    full_w = max(left + width + 120, gx + len(workers) * cell_w + 40)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{full_w}" '
        f'height="{height}" font-family="monospace" font-size="12">',
        f'<text x="8" y="20" font-size="14">capacity under {_esc(slo)} (req/s)</text>',
    ]
    if cells:
        best_key = None
        if best is not None and best.capacity is not None and best.capacity.load is not None:
            a = _axes(best.name)
            best_key = (int(a.get("workers", 0) or 0), int(a.get("threads", 0) or 0))
        out.append(f'<text x="{gx}" y="{gy - 18}">workers →</text>')
        out.append(f'<text x="8" y="{gy - 18}">threads ↓</text>')
        for i, w in enumerate(workers):
            x = gx + i * cell_w
            mid = x + cell_w / 2
            out.append(f'<text x="{mid:.0f}" y="{gy - 4}" text-anchor="middle">{w}</text>')
        for j, t in enumerate(threads):
            y = gy + j * cell_h
            out.append(f'<text x="{gx - 10}" y="{y + 17}" text-anchor="end">{t}</text>')
            for i, w in enumerate(workers):
                x = gx + i * cell_w
                if (w, t) not in cells:
                    out.append(
                        f'<rect x="{x}" y="{y}" width="{cell_w - 2}" height="{cell_h - 2}" '
                        'fill="#eeeeee"/>'
                    )
                    continue
                v = cells[(w, t)]
                share = v / top
                fill = _shade(share)
                stroke = ' stroke="#d62828" stroke-width="3"' if (w, t) == best_key else ""
                out.append(
                    f'<rect x="{x}" y="{y}" width="{cell_w - 2}" height="{cell_h - 2}" '
                    f'fill="{fill}"{stroke}/>'
                )
                label = f"{v:,.0f}" if v else "cannot"
                colour = "#ffffff" if share > 0.55 else "#000000"
                out.append(
                    f'<text x="{x + cell_w / 2 - 1:.0f}" y="{y + 17}" text-anchor="middle" '
                    f'fill="{colour}">{label}</text>'
                )
        out.append(
            f'<text x="8" y="{gy + len(threads) * cell_h + 20}">each cell: the best capacity '
            "of that workers × threads (outlined: the winner; grey: not measured)</text>"
        )
    for n, st in enumerate(rows):
        c = st.capacity
        assert c is not None
        bar_y = bars_y + n * (bar_h + gap)
        bar_w = width * (c.capacity or 0.0) / top
        colour = "#2a9d8f" if best is not None and st.name == best.name else "#8ab6d6"
        label = (
            "interrupted"
            if c.stopped == CAPACITY_INTERRUPTED
            else "cannot meet"
            if c.load is None
            else f"{c.capacity or 0:,.0f}"
        )
        out.append(f'<text x="8" y="{bar_y + 13}">{_esc(st.name[:44])}</text>')
        out.append(
            f'<rect x="{left}" y="{bar_y}" width="{bar_w:.1f}" height="{bar_h}" fill="{colour}"/>'
        )
        out.append(f'<text x="{left + bar_w + 6:.1f}" y="{bar_y + 13}">{label}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _shade(share: float) -> str:
    """White (nothing) to deep teal (the highest capacity)."""
    share = min(1.0, max(0.0, share))
    lo, hi = (247, 252, 253), (0, 88, 84)
    r, g, b = (round(a + (z - a) * share) for a, z in zip(lo, hi, strict=True))
    return f"#{r:02x}{g:02x}{b:02x}"


def _esc(text: str) -> str:
    return printable.xml(text)  # SVG is XML: valid whatever a name or an SLO holds
