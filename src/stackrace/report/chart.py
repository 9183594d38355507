"""QPS and p99 against concurrency, one line per stack, as a self-contained SVG.

Written by hand rather than through a plotting library: two small panels need no
dependency, and the file renders the same in a browser, a README and a blog post.
A p99 point with clients still waiting at the level's end is ringed and labelled with
their number: their wait is in no percentile, and the chart must not hide them either.
A level that got no answer has no p99: no point (never one at 0, which would read as the
fastest), and "no answers" written where it would be.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from stackrace.base.printable import xml as escape  # SVG is XML: valid, whatever a name holds
from stackrace.report.schema import BenchRun, Level, StackResult
from stackrace.settings.units import fmt_count, fmt_us

PALETTE = ("#2f7ed8", "#e4572e", "#29a35a", "#a05195", "#f3a712", "#17becf", "#7f7f7f", "#bc5090")
W, H = 460, 300
PAD_L, PAD_R, PAD_T, PAD_B = 62, 16, 34, 44


def _nice_max(v: float) -> float:
    if v <= 0:
        return 1.0
    exp: float = 10 ** math.floor(math.log10(v))  # an int from 1 up, a float below
    for m in (1, 2, 2.5, 5, 10):
        if v <= m * exp:
            return m * exp
    return 10 * exp


def _panel(
    x0: int,
    title: str,
    stacks: list[StackResult],
    xs: list[int],
    value: Callable[[Level], float | None],  # None: the level has no such figure
    fmt: Callable[[float], str],
    waiting: bool = False,  # mark the levels that ended with clients still waiting
    knee: bool = False,  # mark each stack's knee predicted (rules/knee.py): ◇
) -> list[str]:
    out = [f'<g transform="translate({x0},0)">']
    out.append(f'<text x="{W / 2}" y="20" text-anchor="middle" class="t">{escape(title)}</text>')
    plot_w, plot_h = W - PAD_L - PAD_R, H - PAD_T - PAD_B
    lo, hi = math.log10(min(xs)), math.log10(max(xs))
    span = hi - lo or 1.0
    known = [v for st in stacks for lv in st.levels if (v := value(lv)) is not None]
    ymax = _nice_max(max(known, default=1.0))

    def px(c: int) -> float:
        return PAD_L + (math.log10(c) - lo) / span * plot_w if len(xs) > 1 else PAD_L + plot_w / 2

    def py(v: float) -> float:
        return PAD_T + plot_h - min(v, ymax) / ymax * plot_h

    for i in range(5):
        v = ymax * i / 4
        y = py(v)
        out.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{y:.1f}" y2="{y:.1f}" class="g"/>')
        out.append(f'<text x="{PAD_L - 6}" y="{y + 4:.1f}" text-anchor="end">{fmt(v)}</text>')
    for c in xs:
        out.append(f'<text x="{px(c):.1f}" y="{H - PAD_B + 16}" text-anchor="middle">{c}</text>')
    out.append(
        f'<text x="{PAD_L + plot_w / 2}" y="{H - 8}" text-anchor="middle">concurrency</text>'
    )
    for n, st in enumerate(stacks):
        color = PALETTE[n % len(PALETTE)]
        shown = [(lv, v) for lv in st.levels if (v := value(lv)) is not None]
        pts = " ".join(f"{px(lv.level):.1f},{py(v):.1f}" for lv, v in shown)
        out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2.5"/>')
        for lv in st.levels:
            if value(lv) is None:
                out.append(
                    f'<text x="{px(lv.level):.1f}" y="{PAD_T + 14 + 14 * n}" '
                    f'text-anchor="middle" fill="{color}">no answers</text>'
                )
        for lv, v in shown:
            r = 5 if st.breaking_point == lv.level else 3
            x, y = px(lv.level), py(v)
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="{color}"/>')
            if waiting and lv.window.stale:
                out.append(
                    f'<circle cx="{x:.1f}" cy="{y:.1f}" r="8" fill="none" stroke="{color}" '
                    'stroke-width="1.5" stroke-dasharray="2,2"/>'
                )
                out.append(
                    f'<text x="{x:.1f}" y="{y - 11:.1f}" text-anchor="middle" fill="{color}">'
                    f"{fmt_count(lv.window.stale)} waiting</text>"
                )
        k = st.knee if knee else None
        if k is not None:  # where a fixed pool must start queueing, predicted
            x, y = px(max(min(xs), min(max(xs), round(k.concurrency)))), py(k.rate)
            out.append(
                f'<path d="M{x:.1f},{y - 7:.1f} l7,7 l-7,7 l-7,-7 z" fill="none" '
                f'stroke="{color}" stroke-width="2"><title>{escape(k.sentence())}</title></path>'
            )
    out.append("</g>")
    return out


def svg(run: BenchRun) -> str:
    stacks = [st for st in run.stacks if st.levels and not st.error]
    xs = sorted({lv.level for st in stacks for lv in st.levels if lv.level > 0}) or [1]
    legend_h = 22 * ((len(stacks) + 3) // 4)
    total_h = H + legend_h
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * W}" height="{total_h}" '
        f'viewBox="0 0 {2 * W} {total_h}" font-family="sans-serif" font-size="12">',
        "<style>.t{font-size:15px;font-weight:bold}.g{stroke:#ddd;stroke-width:1}</style>",
        f'<rect width="{2 * W}" height="{total_h}" fill="white"/>',
    ]
    parts += _panel(
        0,
        f"requests/s — {run.settings.workload}"
        + (" (rate, req/s on x)" if run.settings.rate else ""),
        stacks,
        xs,
        lambda lv: lv.rps,
        fmt_count,
        knee=run.settings.rate is None,
    )
    parts += _panel(
        W,
        "p99 latency (ringed: clients still waiting)",
        stacks,
        xs,
        lambda lv: lv.latency.p99 if lv.answered else None,
        fmt_us,
        waiting=True,
    )
    for n, st in enumerate(stacks):
        x = 20 + (n % 4) * (2 * W - 40) / 4
        y = H + 14 + 22 * (n // 4)
        color = PALETTE[n % len(PALETTE)]
        parts.append(f'<rect x="{x:.0f}" y="{y - 9}" width="14" height="4" fill="{color}"/>')
        parts.append(f'<text x="{x + 20:.0f}" y="{y - 4}">{escape(st.name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
