"""A bench run as rows: Markdown for a blog post or PR comment, CSV, and a rich table."""

from __future__ import annotations

import csv
import io

from stackrace.report import thennow
from stackrace.report.schema import BenchRun, Level, StackResult
from stackrace.units import fmt_bytes, fmt_us

COLUMNS = (
    "stack",
    "concurrency",
    "req/s",
    "p50",
    "p99",
    "p99.9",
    "failures",
    "memory",
    "cpu",
)


def _mem(level: Level) -> str:
    before, after = level.memory_before.rss, level.memory_after.rss
    if not before and not after:
        return "-"
    return f"{fmt_bytes(before)} → {fmt_bytes(after)}"


def _failures(level: Level) -> str:
    if not level.failures:
        return "0"
    return f"{level.failure_rate * 100:.1f}% ({sum(level.failures.values())})"


def rows(run: BenchRun) -> list[list[str]]:
    out = []
    for stack in run.stacks:
        if stack.error:
            out.append([stack.name, "-", "error", "", "", "", stack.error, "", ""])
            continue
        for level in stack.levels:
            mark = " ✗" if stack.breaking_point == level.concurrency else ""
            out.append(
                [
                    stack.name,
                    f"{level.concurrency}{mark}" if level.rate is None else f"{level.rate:g}/s",
                    f"{level.rps:,.0f}",
                    fmt_us(level.latency.p50),
                    fmt_us(level.latency.p99),
                    fmt_us(level.latency.p999),
                    _failures(level),
                    _mem(level),
                    f"{level.cpu_percent:.0f}%",
                ]
            )
    return out


def breaking_line(stack: StackResult) -> str:
    if stack.error:
        return f"{stack.name}: not measured ({stack.error})"
    if stack.breaking_point is None:
        return f"{stack.name}: no breaking point up to the highest level"
    return f"{stack.name}: breaks at {stack.breaking_point} ({stack.breaking_reason})"


def markdown(run: BenchRun) -> str:
    s = run.settings
    m = run.machine
    lines = [
        f"**{s.workload}** (`{s.path}`), {s.duration:g}s per level after {s.warmup:g}s warm-up, "
        f"isolation: {s.isolation}. Machine: {m.cpu_model}, {m.cores} cores, {m.os}.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---:" if i else "---" for i in range(len(COLUMNS))) + "|",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows(run)]
    lines.append("")
    lines += [f"- {breaking_line(st)}" for st in run.stacks]
    lines.append("")
    lines.append("✗ marks each stack's breaking point (see README: the rule).")
    then_now = thennow.markdown(run)  # the replayed experiment's figures and claims, if any
    if then_now:
        lines += ["", then_now]
    return "\n".join(lines) + "\n"


def to_csv(run: BenchRun) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(
        [
            "stack",
            "concurrency",
            "rate",
            "seconds",
            "requests",
            "ok",
            "rps",
            "p50_us",
            "p90_us",
            "p99_us",
            "p999_us",
            "max_us",
            "failures",
            "failure_rate",
            "rss_before",
            "rss_after",
            "uss_before",
            "uss_after",
            "cpu_percent",
            "engine_cpu",
            "engine_saturated",
            "breaking",
        ]
    )
    for st in run.stacks:
        for lv in st.levels:
            lat = lv.latency
            w.writerow(
                [
                    st.name,
                    lv.concurrency,
                    lv.rate or "",
                    f"{lv.seconds:.3f}",
                    lv.requests,
                    lv.ok,
                    f"{lv.rps:.1f}",
                    lat.p50,
                    lat.p90,
                    lat.p99,
                    lat.p999,
                    lat.max,
                    sum(lv.failures.values()),
                    f"{lv.failure_rate:.5f}",
                    lv.memory_before.rss,
                    lv.memory_after.rss,
                    lv.memory_before.uss,
                    lv.memory_after.uss,
                    f"{lv.cpu_percent:.1f}",
                    f"{lv.engine_cpu:.1f}",
                    int(lv.engine_saturated),
                    int(st.breaking_point == lv.concurrency),
                ]
            )
    return buf.getvalue()


def rich_table(run: BenchRun, title: str | None = None):  # -> rich.table.Table
    from rich.table import Table

    table = Table(title=title, header_style="bold")
    for i, col in enumerate(COLUMNS):
        table.add_column(col, justify="left" if i == 0 else "right")
    previous = None
    for r in rows(run):
        if previous is not None and r[0] != previous:
            table.add_section()
        previous = r[0]
        style = "red" if r[1].endswith("✗") else None
        table.add_row(*r, style=style)
    return table
