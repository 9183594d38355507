"""A race's summary: its figures, one arithmetic for every place they are shown, and
files (Markdown for a slide or a PR, JSON for a script).

The rows are the session's `SummaryRow`s (the last ramp's levels when a ramp ran, else
the levels explored). Each figure comes from one `StepResult` by one function
(`level_figures`), so the summary's line for a stack and the per-level table below it
cannot disagree: the breaking point's "failed" and "p99 there" are the per-level
table's cells at that level; req/s is goodput (answers that count). Each level's state
and proof are the rules' (stackrace.rules.level, the pane's own judgment), and every
level is named with its state, the levels after a break included: a stack
that never broke is said to have kept up to a level with its p99 there and the bound
it met, and a level the engine or a busy core limited is "not judged". "failed" is
the share of attempts that failed (the rules' figure, and the proof's); clients that
waited the whole level with no answer are their own figure ("no answer"), never folded
into it; a level where nothing was answered says "no answers", not a p99 of 0 µs.

Each file says which race it was (`SummaryContext`): the workload and its parameters,
the timeout, keep-alive, where the stacks and engines ran, when, stackrace's version,
whether the figures were synthetic, and why the ramp ended.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from stackrace import __version__
from stackrace.base import printable
from stackrace.base.atomicfile import WriteError, write_atomic
from stackrace.race.live.session import Session
from stackrace.race.live.view import SummaryRow
from stackrace.rules.breaking import StepResult
from stackrace.rules.level import KEPT
from stackrace.rules.summaries import every_level, unbroken_sentence
from stackrace.settings.units import fmt_us


@dataclass(frozen=True)
class LevelFigures:
    """One stack at one level, as every summary shows it."""

    level: int
    rps: float
    p99_us: int | None  # None: nothing was answered at this level
    failed_pct: float  # failed, of every attempt (the breaking rule's and the proof's share)
    no_answer: int  # clients that waited longer than the level with no answer
    waiting: int
    cpu_percent: float | None

    def p99(self) -> str:
        return fmt_us(self.p99_us) if self.p99_us is not None else "no answers"

    def cell(self) -> str:
        """ "4,025 · 30.5ms · 0.0% failed" (and ", 20 no answer" when some waited)."""
        out = f"{self.rps:,.0f} · {self.p99()} · {self.failed_pct:.1f}% failed"
        return out + (f", {self.no_answer:,} no answer" if self.no_answer else "")


def level_figures(step: StepResult) -> LevelFigures:
    return LevelFigures(
        level=step.level,
        rps=step.rps,
        p99_us=step.p99_us if step.window.latency.count else None,
        failed_pct=100 * step.errors / step.attempts if step.attempts else 0.0,
        no_answer=step.stale,
        waiting=step.window.waiting,
        cpu_percent=step.cpu_percent,
    )


def at_breaking(row: SummaryRow) -> LevelFigures | None:
    """The figures of the breaking level: the same cell as the per-level table's."""
    if row.breaking is None:
        return None
    step = next((s for s in row.steps if s.level == row.breaking.level), None)
    return level_figures(step) if step is not None else None


def unbroken_text(row: SummaryRow, rate_mode: bool = False, short: bool = False) -> str:
    """A stack without a breaking point, by the rules (stackrace.rules.level): the
    highest level it kept up at, its p99 there and the bound it met, and the levels
    not judged because the engine or a busy core was the limit. `short`: for a cell."""
    if not short:
        return unbroken_sentence(row.judgments, rate_mode)
    limited = [j for j in row.judgments if j.not_judged]
    if limited:
        return f"not judged from {_level(limited[0].level, rate_mode)}"
    kept = [j for j in row.judgments if j.state in KEPT]
    if kept:
        return f"none up to {_level(kept[-1].level, rate_mode)}"
    return "not reached"


def levels_text(row: SummaryRow, rate_mode: bool = False) -> str:
    """Every level of the row and its state, the levels after its break included."""
    return every_level([s.level for s in row.steps], row.judgments, rate_mode)


def kept_up(row: SummaryRow) -> bool:
    """No break, and every level judged: the summary may show it in green."""
    return row.breaking is None and not any(j.not_judged for j in row.judgments)


def peak_text(row: SummaryRow) -> str:
    if row.peak is None:
        return "–"
    return f"{row.peak.rps:,.0f} req/s" if row.peak.rps > 0 else "none answered"


@dataclass(frozen=True)
class SummaryContext:
    """Which race the summary is of: what a reader of the file needs to redo it."""

    workload: str
    params: dict[str, object]  # the workload's: io delay, queries per request
    path: str  # what was loaded, for one stack (e.g. /io?ms=10)
    timeout_s: float
    keepalive: bool
    mode: str  # closed loop, or constant rate
    placement: str  # where the stacks and engines ran
    created: str
    version: str = __version__
    synthetic: bool = False
    ended: str = ""  # why the ramp ended (its top reached, or stopped by hand)
    notes: list[str] = field(default_factory=list)  # its clean start: who restarted, why

    def lines(self) -> list[str]:
        params = ", ".join(f"{k} {v}" for k, v in self.params.items())
        out = [
            f"- workload: {self.workload}" + (f" ({params})" if params else "")
            + (f", `GET {self.path}`" if self.path else ""),
            f"- {self.mode}; timeout {self.timeout_s:g} s; "
            + ("keep-alive" if self.keepalive else "a new connection per request"),
            f"- placement: {self.placement or 'not recorded'}",
            f"- {self.created}, stackrace {self.version}",
        ]  # fmt: skip
        if self.ended:
            out.append(f"- the ramp {self.ended}")
        out += [f"- clean start: {n}" for n in self.notes]
        return out


def context(session: Session) -> SummaryContext:
    s = session.core.settings
    params: dict[str, object] = {}
    if s.workload == "io":
        params["io delay"] = f"{s.io_ms} ms"
    if s.workload in ("db", "dbjson"):
        params["queries per request"] = s.queries
    placement = session.core.placement
    path = next((m.url for m in session.core.members.values() if m.url), "")

    parts = urlsplit(path)
    return SummaryContext(
        workload=s.workload,
        params=params,
        path=parts.path + (f"?{parts.query}" if parts.query else "") if path else "",
        timeout_s=s.timeout,
        keepalive=s.keepalive,
        mode="constant rate, req/s per stack" if session.rate is not None else "closed loop",
        placement=placement.note if placement is not None else "",
        created=time.strftime("%Y-%m-%d %H:%M:%S %z"),
        synthetic=session.synthetic,
        ended=session.ramp_end if session.summary_from_ramp else "",
        notes=list(session.ramp_notes) if session.summary_from_ramp else [],
    )


def _level(n: int, rate_mode: bool) -> str:
    return f"{n:,} req/s" if rate_mode else f"c={n:,}"


def _mib(n: int | None) -> str:
    return f"{n / 1048576:.1f} MiB" if n else "–"


def to_markdown(
    rows: Sequence[SummaryRow],
    rate_mode: bool,
    *,
    title: str,
    synthetic: bool = False,
    context: SummaryContext | None = None,
) -> str:
    out = [f"## {title}", ""]
    if synthetic:
        out += ["**Synthetic figures** (`stackrace --demo`): a model, nothing was measured.", ""]
    if context is not None:
        out += [*context.lines(), ""]
    out += [
        "| stack | peak req/s | at | breaking point | kind | why | p99 there | failed there "
        "| RSS before | RSS peak |",
        "|---|---:|---|---|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        peak = r.peak
        b = r.breaking
        there = at_breaking(r)
        out.append(
            "| "
            + " | ".join(
                [
                    r.name,
                    peak_text(r).removesuffix(" req/s"),
                    _level(peak.level, rate_mode) if peak else "–",
                    _level(b.level, rate_mode) if b else unbroken_text(r, rate_mode, True),
                    b.kind if b else "",
                    (r.why if b else unbroken_text(r, rate_mode)) + _why_md(r),
                    there.p99() if there else "",
                    f"{there.failed_pct:.1f}%" if there else "",
                    _mib(r.mem_before.rss if r.mem_before else None),
                    _mib(r.mem_peak),
                ]
            )
            + " |"
        )
    # every level named, those after the break too (what did c=1,000 do?)
    out += [""] + [f"- {r.name}, every level: {levels_text(r, rate_mode)}" for r in rows if r.steps]
    out += ["", "Per level (req/s · p99 · failed, and clients with no answer):", ""]
    levels = sorted({s.level for r in rows for s in r.steps})
    if levels:
        out.append("| stack | " + " | ".join(_level(n, rate_mode) for n in levels) + " |")
        out.append("|---|" + "---:|" * len(levels))
        for r in rows:
            by = {s.level: s for s in r.steps}
            cells = [level_figures(by[n]).cell() if n in by else "–" for n in levels]
            out.append(f"| {r.name} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def to_dict(
    rows: Sequence[SummaryRow],
    rate_mode: bool,
    *,
    title: str,
    synthetic: bool = False,
    context: SummaryContext | None = None,
) -> dict[str, object]:
    def verdict(r: SummaryRow) -> dict[str, object] | None:
        b = r.breaking
        if b is None:
            return None
        there = at_breaking(r)
        return {
            "level": b.level,
            "kind": b.kind,
            "reason": b.reason,
            "why": r.why,
            "cause": r.cause,  # why it broke, from its evidence window ("" none)
            "p99_us": there.p99_us if there else None,
            "failed_pct": there.failed_pct if there else None,
            "rps": b.rps,
        }

    return {
        "title": title,
        "synthetic": synthetic,
        "mode": "rate" if rate_mode else "closed",
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "race": asdict(context) if context is not None else None,
        "stacks": [
            {
                "id": r.id,
                "name": r.name,
                "peak": {"level": r.peak.level, "rps": r.peak.rps} if r.peak else None,
                "breaking": verdict(r),
                # without a break: the highest level it kept up at, its p99 and bound,
                # and the levels not judged (the engine or a busy core was the limit)
                "unbroken": unbroken_text(r, rate_mode) if r.breaking is None else None,
                "knee": r.knee,  # the knee predicted (rules/knee.py), "" none
                "rss_before": r.mem_before.rss if r.mem_before else None,
                "rss_peak": r.mem_peak or None,
                "levels": [
                    {
                        **asdict(level_figures(s)),
                        "p50_us": s.p50_us,
                        "max_us": s.max_us,
                        "requests": s.requests,
                        "failed": s.errors,
                        **_judged(r, s.level),
                    }
                    for s in r.steps
                ],
            }
            for r in rows
        ],
    }


def _why_md(r: SummaryRow) -> str:
    """The cause and the knee, for a Markdown cell (text from the app: escaped)."""
    extra = ([f"why: {r.cause}"] if r.cause else []) + ([r.knee] if r.knee else [])
    return "".join(" · " + printable.markdown(x) for x in extra)


def _judged(row: SummaryRow, level: int) -> dict[str, object]:
    """A level's state by the rules and the figures that prove it (none when the
    level was too short to judge)."""
    j = next((j for j in row.judgments if j.level == level), None)
    return {"state": j.state, "why": j.why} if j is not None else {"state": None, "why": ""}


def export(
    rows: Sequence[SummaryRow],
    rate_mode: bool,
    directory: Path,
    *,
    title: str,
    synthetic: bool = False,
    stem: str | None = None,
    context: SummaryContext | None = None,
    page: Callable[[], str] | None = None,
) -> tuple[Path, Path]:
    """Write STEM.md and STEM.json into `directory` (and STEM.html: `page`, the race as
    one offline page, race/live/page.py); return the first two paths.

    Each file is written whole or not at all (stackrace.base.atomicfile); an OSError
    (WriteError: the file and the cause) says which could not be."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WriteError(directory, exc) from exc
    stem = stem or time.strftime("stackrace-summary-%Y%m%d-%H%M%S")
    md = directory / f"{stem}.md"
    js = directory / f"{stem}.json"
    text = to_markdown(rows, rate_mode, title=title, synthetic=synthetic, context=context)
    write_atomic(md, text)
    data = to_dict(rows, rate_mode, title=title, synthetic=synthetic, context=context)
    write_atomic(js, json.dumps(data, indent=2) + "\n")
    if page is not None:
        write_atomic(directory / f"{stem}.html", page())
    return md, js
