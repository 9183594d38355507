"""Capacities under an SLO, ranked: the table `bench --capacity`, `tune` and the app's
summary print (one ranking, one order: highest req/s first; a stack that cannot meet
the SLO at any load last, with why)."""

from __future__ import annotations

from stackrace.report.schema import CapacityResult, StackResult
from stackrace.units import fmt_bytes


def rank_key(c: CapacityResult) -> tuple[bool, float]:
    """The order of every capacity ranking: the highest req/s under the SLO first, a
    stack that cannot meet it at any load last."""
    return (c.load is None, -(c.capacity or 0.0))


def ranked(stacks: list[StackResult]) -> list[StackResult]:
    """Stacks with a capacity, the highest req/s under the SLO first."""
    found = [st for st in stacks if st.capacity is not None]
    return sorted(found, key=lambda st: rank_key(st.capacity))  # type: ignore[arg-type]


def at(c: CapacityResult, load: float | None) -> str:
    if load is None:
        return "-"
    return f"c={load:g}" if c.mode == "concurrency" else f"{load:,.0f} req/s"


def row(c: CapacityResult) -> list[str]:
    """capacity (req/s ± margin), at (the load), breaks at, memory, CPU per request."""
    if c.load is None:
        cap = "cannot meet"
    else:
        margin = f" ± {c.margin * 100:.0f} %" if c.margin is not None else ""
        cap = f"{c.capacity or 0:,.0f} req/s{margin}"
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
    lines = [f"Capacity under the SLO ({slo}), best first:", ""]
    lines.append("| " + " | ".join(HEADER) + " |")
    lines.append("|" + "---|" * len(HEADER))
    for n, st in enumerate(ranked(stacks), 1):
        lines.append("| " + " | ".join([str(n), st.name, *row(st.capacity)]) + " |")  # type: ignore[arg-type]
    return "\n".join(lines) + "\n"


def svg(stacks: list[StackResult], slo: str) -> str:
    """Capacity under the SLO per candidate, a bar each in the order measured (a tune:
    workers × threads, as swept), the winner in a colour of its own."""
    rows = [st for st in stacks if st.capacity is not None]
    top = max((st.capacity.capacity or 0.0 for st in rows), default=0.0) or 1.0  # type: ignore[union-attr]
    best = ranked(rows)[0].name if rows else ""
    bar_h, gap, left, width = 18, 6, 330, 420
    height = 40 + len(rows) * (bar_h + gap)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 120}" '
        f'height="{height}" font-family="monospace" font-size="12">',
        f'<text x="8" y="20" font-size="14">capacity under {_esc(slo)} (req/s)</text>',
    ]
    for n, st in enumerate(rows):
        c = st.capacity
        assert c is not None
        y = 32 + n * (bar_h + gap)
        w = width * (c.capacity or 0.0) / top
        colour = "#2a9d8f" if st.name == best else "#8ab6d6"
        label = "cannot meet" if c.load is None else f"{c.capacity or 0:,.0f}"
        out.append(f'<text x="8" y="{y + 13}">{_esc(st.name[:44])}</text>')
        out.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{colour}"/>')
        out.append(f'<text x="{left + w + 6:.1f}" y="{y + 13}">{label}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
