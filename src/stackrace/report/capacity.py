"""Capacities under an SLO, ranked: the table `bench --capacity`, `tune` and the app's
summary print (one ranking, one order: highest req/s first; a stack that cannot meet
the SLO at any load last, with why)."""

from __future__ import annotations

from stackrace.report.schema import CapacityResult, StackResult
from stackrace.units import fmt_bytes


def ranked(stacks: list[StackResult]) -> list[StackResult]:
    """Stacks with a capacity, the highest req/s under the SLO first."""
    found = [st for st in stacks if st.capacity is not None]
    return sorted(found, key=lambda st: -(st.capacity.capacity or 0.0))  # type: ignore[union-attr]


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
