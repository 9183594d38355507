"""A bench run as rows: Markdown for a blog post or PR comment, CSV, and a rich table."""

from __future__ import annotations

import csv
import io
from typing import TYPE_CHECKING

from stackrace.report import thennow
from stackrace.report.schema import NOISY_SPREAD, BenchRun, Level, StackResult
from stackrace.rules.breaking import step_result
from stackrace.settings.units import fmt_bytes, fmt_us

if TYPE_CHECKING:
    from rich.table import Table

COLUMNS = (
    "stack",
    "concurrency",
    "req/s",
    "p50",
    "p99",
    "p99.9",
    "failures",
    "waiting",
    "memory",
    "cpu",
)


# the memory and CPU cells of a server started by hand without --pid (race/core/urls.py): a
# 0 there would read as a server that used nothing
NOT_SAMPLED = "not sampled"


def _waiting(level: Level) -> str:
    """Still waiting at the level's end (sent, no answer), and the oldest's age."""
    w = level.window
    if not w.waiting:
        return "0"
    return f"{w.waiting:,} ({fmt_us(w.oldest_wait_us)})"


def _rps(level: Level) -> str:
    """req/s of all repeats pooled; with repeats, the lowest and highest in brackets."""
    if len(level.samples) < 2:
        return f"{level.rps:,.0f}"
    low, high = level.rps_range
    return f"{level.rps:,.0f} ({low:,.0f}–{high:,.0f})"


def flags(level: Level) -> list[str]:
    """What a reader must know before trusting a level's figures."""
    out = []
    if level.spread > NOISY_SPREAD:
        low, high = level.rps_range
        out.append(
            f"its {len(level.samples)} repeats differ by {level.spread:.0%} "
            f"({low:,.0f}–{high:,.0f} req/s)"
        )
    if level.db_down:
        out.append("database fault (down, restarted or its tables gone): not judged")
    if level.little is not None and not level.little.ok:
        out.append(f"Little's law: {level.little.reason}")
    if level.engine_limited:
        out.append(f"engine-limited: {level.engine_limit}")
    if level.window.stale:
        n = level.window.stale
        out.append(f"{n:,} client{'s' if n != 1 else ''} got no answer in the level")
    if step_result(level.level, level.window).starving:  # the breaking rule's own test
        w = level.window
        out.append(
            f"starving: {100 * w.starved_share:.0f}% of the clients' time went without an "
            f"answer (up to {w.starved_wait_us / 1e6:.1f} s) while the others were served"
        )
    return out


NO_ANSWERS = "no answers"


def _latencies(level: Level) -> list[str]:
    """p50, p99, p99.9; a level that got no answer has no latency: "no answers" and
    empty cells, never "0µs", which would read as instant answers."""
    if not level.answered:
        return [NO_ANSWERS, "", ""]
    lat = level.latency
    return [fmt_us(lat.p50), fmt_us(lat.p99), fmt_us(lat.p999)]


def no_success(level: Level) -> str:
    """Why a level that failed entirely did: every request and where it ended."""
    w = level.window
    kinds = []
    for kind, n in sorted(w.failures.items(), key=lambda kv: -kv[1]):
        if kind == "http_status":
            codes = ", ".join(f"{c}" for c, k in sorted(w.status.items()) if c >= 400)
            kinds.append(f"{kind} {n:,} ({codes})" if codes else f"{kind} {n:,}")
        else:
            kinds.append(f"{kind} {n:,}")
    how = f": {', '.join(kinds)}" if kinds else ""
    waiting = f", {w.waiting:,} still waiting" if w.waiting else ""
    return f"every request failed ({w.sent:,} sent, none succeeded{how}{waiting})"


def _mem(level: Level) -> str:
    before, after = level.memory_before.rss, level.memory_after.rss
    if not before and not after:
        return "-"
    return f"{fmt_bytes(before)} → {fmt_bytes(after)}"


def _failures(level: Level) -> str:
    if not level.failures:
        return "0"
    return f"{level.error_rate * 100:.1f}% ({sum(level.failures.values())})"


def rows(run: BenchRun) -> list[list[str]]:
    out = []
    for stack in run.stacks:
        if stack.error and not stack.levels:
            out.append([stack.name, "-", "error", "", "", "", stack.error, "", "", ""])
            continue
        for level in stack.levels:
            mark = " ✗" if stack.breaking_point == level.level else ""
            mark += " †" if flags(level) else ""
            out.append(
                [
                    stack.name,
                    f"{level.concurrency}{mark}" if level.rate is None else f"{level.rate:g}/s",
                    _rps(level),
                    *_latencies(level),
                    _failures(level),
                    _waiting(level),
                    _mem(level) if stack.sampled else NOT_SAMPLED,
                    f"{level.cpu_percent:.0f}%" if stack.sampled else NOT_SAMPLED,
                ]
            )
    return out


def breaking_line(stack: StackResult, interrupted: bool = False) -> str:
    started = f" (started by you: {stack.url}{'' if stack.sampled else ', not sampled'})"
    return _breaking(stack, interrupted) + (started if stack.url else "")


def _breaking(stack: StackResult, interrupted: bool = False) -> str:
    if stack.error and not stack.levels:
        return f"{stack.name}: not measured ({stack.error})"
    end = f" — then {stack.error}" if stack.error else ""
    if stack.breaking_point is None and interrupted:
        # the levels not measured could hold it: no claim from what was not seen
        return (
            f"{stack.name}: no breaking point in the {len(stack.levels)} levels measured "
            f"before the run was interrupted (the others were not measured){end}"
        )
    if stack.breaking_point is None:
        return f"{stack.name}: no breaking point up to the highest level{end}"
    return (
        f"{stack.name}: {stack.breaking_kind or 'breaks'} at {stack.breaking_point:,} "
        f"({stack.breaking_reason}){end}"
    )


def markdown(run: BenchRun) -> str:
    s = run.settings
    m = run.machine
    lines = [
        (f"`{s.path}`" if s.own_requests else f"**{s.workload}** (`{s.path}`)")
        + f", {s.duration:g}s per level after {s.warmup:g}s warm-up, "
        f"isolation: {s.isolation}. Machine: {m.cpu_model}, {m.cores} cores, {m.os}.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---:" if i else "---" for i in range(len(COLUMNS))) + "|",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows(run)]
    lines.append("")
    lines += [f"- {breaking_line(st, bool(run.interrupted))}" for st in run.stacks]
    notes = notes_lines(run)
    if notes:
        lines.append("")
        lines += [f"- † {n}" for n in notes]
    lines.append("")
    lines.append(
        "✗ marks each stack's breaking point (the rule: stackrace's docs/bench.md); † a "
        "level whose figures come with a note. *waiting*: requests sent and not answered "
        "when the level ended (the oldest's age in brackets)."
    )
    repeats = max((len(lv.samples) for st in run.stacks for lv in st.levels), default=1)
    if repeats > 1:
        lines.append(
            f"Levels were measured up to {repeats} times: *req/s* is every repeat pooled "
            "(all answers over all measured time), the lowest and highest repeat in "
            "brackets; latencies, failures and waiting are of all repeats together, cpu the "
            "median repeat's."
        )
    if run.interrupted:
        lines.append(f"The run was interrupted ({run.interrupted}): later levels are missing.")
    then_now = thennow.markdown(run)  # the replayed experiment's figures and claims, if any
    if then_now:
        lines += ["", then_now]
    return "\n".join(lines) + "\n"


def notes_lines(run: BenchRun) -> list[str]:
    out = list(run.notes)
    for st in run.stacks:
        for lv in st.levels:
            for f in flags(lv):
                out.append(f"{st.name} @ {lv.level:,}: {f}")
    return out


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
            "sent",
            "waiting",
            "oldest_wait_us",
            "stale",
            "rss_before",
            "rss_after",
            "uss_before",
            "uss_after",
            "cpu_percent",
            "engine_cpu",
            "engine_saturated",
            "breaking",
            "repeats",
            "rps_min",
            "rps_max",
        ]
    )
    for st in run.stacks:
        for lv in st.levels:
            lat = lv.latency
            # no answer, no latency: empty cells (a 0 would be averaged in as instant)
            latencies = [lat.p50, lat.p90, lat.p99, lat.p999, lat.max] if lv.answered else [""] * 5
            w.writerow(
                [
                    st.name,
                    lv.concurrency,
                    lv.rate or "",
                    f"{lv.seconds:.3f}",
                    lv.requests,
                    lv.ok,
                    f"{lv.rps:.1f}",
                    *latencies,
                    sum(lv.failures.values()),
                    f"{lv.failure_rate:.5f}",
                    lv.window.sent,
                    lv.window.waiting,
                    lv.window.oldest_wait_us,
                    lv.window.stale,
                    *(
                        (
                            lv.memory_before.rss,
                            lv.memory_after.rss,
                            lv.memory_before.uss,
                            lv.memory_after.uss,
                            f"{lv.cpu_percent:.1f}",
                        )
                        if st.sampled
                        else [NOT_SAMPLED] * 5
                    ),
                    f"{lv.engine_cpu:.1f}",
                    int(lv.engine_saturated),
                    int(st.breaking_point == lv.level),
                    len(lv.samples) or 1,
                    *(f"{x:.1f}" for x in lv.rps_range),
                ]
            )
    return buf.getvalue()


def rich_table(run: BenchRun, title: str | None = None) -> Table:
    from rich.markup import escape
    from rich.table import Table

    # names are user text (`gunicorn-sync[app]`): never rich markup
    table = Table(title=escape(title) if title else None, header_style="bold")
    for i, col in enumerate(COLUMNS):
        table.add_column(col, justify="left" if i == 0 else "right")
    previous = None
    for r in rows(run):
        if previous is not None and r[0] != previous:
            table.add_section()
        previous = r[0]
        style = "red" if r[1].endswith("✗") else None
        table.add_row(*(escape(c) for c in r), style=style)
    return table


def path_lines(run: BenchRun) -> list[str]:
    """Each of your requests on each stack, over the whole run: what the server was
    sent and what it answered (a test compares these with the app's own counts)."""
    out = []
    for st in run.stacks:
        for p in st.paths:
            line = f"{st.name} {p.name}: sent {p.sent:,} = {p.answered:,} answered"
            line += f" + {p.failed:,} failed + {p.waiting:,} waiting"
            if p.errors:
                bad = ", ".join(f"{c}: {n:,}" for c, n in sorted(p.status.items()))
                line += f"; {p.errors:,} answers not expected ({bad})"
            out.append(line)
    return out
