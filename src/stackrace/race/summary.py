"""A race's summary as files: Markdown for a slide or a PR, JSON for a script.

The rows are the session's `SummaryRow`s (the last ramp's levels when a ramp ran, else
the levels explored); each file says which, and whether the figures were synthetic.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

from stackrace.atomicfile import WriteError, write_atomic
from stackrace.race.session import SummaryRow
from stackrace.units import fmt_us


def _level(n: int, rate_mode: bool) -> str:
    return f"{n:,} req/s" if rate_mode else f"c={n:,}"


def _mib(n: int | None) -> str:
    return f"{n / 1048576:.1f} MiB" if n else "–"


def to_markdown(
    rows: Sequence[SummaryRow], rate_mode: bool, *, title: str, synthetic: bool = False
) -> str:
    out = [f"## {title}", ""]
    if synthetic:
        out += ["**Synthetic figures** (`stackrace --demo`): a model, nothing was measured.", ""]
    out += [
        "| stack | peak req/s | at | breaking point | kind | why | RSS before | RSS peak |",
        "|---|---:|---|---|---|---|---:|---:|",
    ]
    for r in rows:
        peak = r.peak
        b = r.breaking
        out.append(
            "| "
            + " | ".join(
                [
                    r.name,
                    f"{peak.rps:,.0f}" if peak else "–",
                    _level(peak.level, rate_mode) if peak else "–",
                    _level(b.level, rate_mode) if b else "not reached",
                    b.kind if b else "",
                    r.why if b else "",
                    _mib(r.mem_before.rss if r.mem_before else None),
                    _mib(r.mem_peak),
                ]
            )
            + " |"
        )
    out += ["", "Per level (req/s · p99 · failed):", ""]
    levels = sorted({s.level for r in rows for s in r.steps})
    if levels:
        out.append("| stack | " + " | ".join(_level(n, rate_mode) for n in levels) + " |")
        out.append("|---|" + "---:|" * len(levels))
        for r in rows:
            by = {s.level: s for s in r.steps}
            cells = []
            for n in levels:
                s = by.get(n)
                if s is None:
                    cells.append("–")
                    continue
                p99 = fmt_us(s.p99_us) if s.requests else "no answers"  # never 0µs
                cells.append(f"{s.rps:,.0f} · {p99} · {100 * s.failure_ratio:.1f}%")
            out.append(f"| {r.name} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def to_dict(
    rows: Sequence[SummaryRow], rate_mode: bool, *, title: str, synthetic: bool = False
) -> dict[str, object]:
    def verdict(r: SummaryRow) -> dict[str, object] | None:
        b = r.breaking
        if b is None:
            return None
        return {
            "level": b.level,
            "kind": b.kind,
            "reason": b.reason,
            "why": r.why,
            "p99_us": b.p99_us,
            "rps": b.rps,
        }

    return {
        "title": title,
        "synthetic": synthetic,
        "mode": "rate" if rate_mode else "closed",
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "stacks": [
            {
                "id": r.id,
                "name": r.name,
                "peak": {"level": r.peak.level, "rps": r.peak.rps} if r.peak else None,
                "breaking": verdict(r),
                "rss_before": r.mem_before.rss if r.mem_before else None,
                "rss_peak": r.mem_peak or None,
                "levels": [
                    {
                        "level": s.level,
                        "rps": s.rps,
                        "p50_us": s.p50_us,
                        "p99_us": s.p99_us,
                        "max_us": s.max_us,
                        "requests": s.requests,
                        "failed": s.failed,
                        "waiting": s.window.waiting,
                        "cpu_percent": s.cpu_percent,
                    }
                    for s in r.steps
                ],
            }
            for r in rows
        ],
    }


def export(
    rows: Sequence[SummaryRow],
    rate_mode: bool,
    directory: Path,
    *,
    title: str,
    synthetic: bool = False,
    stem: str | None = None,
) -> tuple[Path, Path]:
    """Write STEM.md and STEM.json into `directory`; return both paths.

    Each file is written whole or not at all (stackrace.atomicfile); an OSError
    (WriteError: the file and the cause) says which could not be."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WriteError(directory, exc) from exc
    stem = stem or time.strftime("stackrace-summary-%Y%m%d-%H%M%S")
    md = directory / f"{stem}.md"
    js = directory / f"{stem}.json"
    write_atomic(md, to_markdown(rows, rate_mode, title=title, synthetic=synthetic))
    data = to_dict(rows, rate_mode, title=title, synthetic=synthetic)
    write_atomic(js, json.dumps(data, indent=2) + "\n")
    return md, js
