"""A bench run as rows: Markdown for a blog post or PR comment, CSV, and a rich table."""

from __future__ import annotations

import csv
import io
from typing import TYPE_CHECKING

from stackrace.base import printable
from stackrace.base.printable import markdown as md
from stackrace.base.printable import markdown_code as code
from stackrace.engine.model import NOT_THE_SERVERS
from stackrace.report import thennow, why
from stackrace.report.judged import breaking, judgments, rate_mode
from stackrace.report.schema import NOISY_SPREAD, BenchRun, Level, StackResult
from stackrace.rules.confidence import estimate
from stackrace.rules.level import Judgment, starves
from stackrace.rules.summaries import breaking_sentence, not_judged_note, unbroken_sentence
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


def _rps(level: Level, rounds: bool) -> str:
    """req/s of all rounds pooled; with rounds, the 90 % interval of the next run's
    figure in brackets (from the rounds' spread: rules/confidence.estimate). A run from
    before rounds (repeats in a row: `rounds` False) shows its repeats' range, which is
    no interval."""
    if len(level.samples) < 2:
        return f"{level.rps:,.0f}"
    if not rounds:
        low, high = level.rps_range
        return f"{level.rps:,.0f} ({low:,.0f}–{high:,.0f})"
    est = estimate("", level.samples, None)
    return f"{level.rps:,.0f} ({est.lo:,.0f}–{est.hi:,.0f})"


def flags(level: Level, judgment: Judgment | None = None, rounds: bool = True) -> list[str]:
    """What a reader must know before trusting a level's figures (and, with its
    judgment, whether the rules would judge it at all)."""
    out = []
    note = not_judged_note(judgment) if judgment is not None else ""
    if note:
        out.append(note)
    if level.spread > NOISY_SPREAD:
        low, high = level.rps_range
        out.append(
            f"its {len(level.samples)} {'rounds' if rounds else 'repeats'} differ by "
            f"{level.spread:.0%} "
            f"({low:,.0f}–{high:,.0f} req/s)"
        )
    if level.db_down:
        out.append("database fault (down, restarted or its tables gone): not judged")
    if level.little is not None and not level.little.ok:
        out.append(f"Little's law: {level.little.reason}")
    if level.engine_limited and not note:
        out.append(f"engine-limited: {level.engine_limit}")
    if level.window.stale:
        n = level.window.stale
        out.append(f"{n:,} client{'s' if n != 1 else ''} got no answer in the level")
    if starves(level.window):  # the rules' own test
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
    """The share and count the server answers for; beside them, what ended unanswered
    but is not its failure (abandoned by the engine, a GOAWAY's streams sent again:
    engine/model.py NOT_THE_SERVERS), so the two figures never disagree."""
    if not level.failures:
        return "0"
    theirs = sum(n for k, n in level.failures.items() if k not in NOT_THE_SERVERS)
    other = sum(level.failures.values()) - theirs
    said = f"{level.error_rate * 100:.1f}% ({theirs})"
    return f"{said}; {other} not the server's" if other else said


def rows(run: BenchRun) -> list[list[str]]:
    out = []
    for stack in run.stacks:
        if stack.error and not stack.levels:
            out.append([stack.name, "-", "error", "", "", "", stack.error, "", "", ""])
            continue
        judged = judgments(stack, run)
        broke = breaking(stack, run)  # by today's rules, whatever the file recorded
        for level in stack.levels:
            mark = " ✗" if broke is not None and broke.level == level.level else ""
            mark += " †" if flags(level, judged.get(level.level), run.settings.rounds) else ""
            out.append(
                [
                    stack.name,
                    f"{level.concurrency}{mark}" if level.rate is None else f"{level.rate:g}/s",
                    _rps(level, run.settings.rounds),
                    *_latencies(level),
                    _failures(level),
                    _waiting(level),
                    _mem(level) if stack.sampled else NOT_SAMPLED,
                    f"{level.cpu_percent:.0f}%" if stack.sampled else NOT_SAMPLED,
                ]
            )
    return out


def breaking_line(stack: StackResult, run: BenchRun) -> str:
    started = f" (started by you: {stack.url}{'' if stack.sampled else ', not sampled'})"
    line = _breaking(stack, run) + (started if stack.url else "")
    # why it broke there, with its advice clause (report/why.py); the knee predicted
    verdict = breaking(stack, run)
    found = why.why_at(stack, verdict.level) if verdict is not None else None
    extra = [f"why: {why.cause_line(found)}"] if found is not None else []
    extra += [k] if (k := why.knee_line(stack)) else []
    return " · ".join([line, *extra])


def _breaking(stack: StackResult, run: BenchRun) -> str:
    """Where the stack stopped keeping up, by the rules, and its p99 there; or the
    highest level it kept up at, its p99 and the bound it met (stackrace.rules.level),
    and, when the run was interrupted, that the levels after were not measured."""
    if stack.error and not stack.levels:
        return f"{stack.name}: not measured ({stack.error})"
    end = f" — then {stack.error}" if stack.error else ""
    rate = rate_mode(run)
    # judged again by today's rules: a run file written by an older rule reads the same
    # as a new one (its own fields stay as they were, for a reader of the JSON)
    verdict = breaking(stack, run)
    if verdict is None:
        judged = judgments(stack, run)
        said = unbroken_sentence(list(judged.values()), rate)
        if run.interrupted:
            # the levels not measured could hold it: no claim from what was not seen
            n = len(stack.levels)
            said += (
                f"; the run was interrupted after {n} level{'s' if n != 1 else ''}: "
                "the others were not measured"
            )
        return f"{stack.name}: {said}{end}"
    return f"{stack.name}: {breaking_sentence(verdict, rate)}{end}"


def markdown(run: BenchRun) -> str:
    s = run.settings
    m = run.machine
    lines = [
        # every text of a run file is escaped for Markdown (printable.markdown): a stack's
        # name, a path, a machine's words; only the table's own syntax is written raw
        (code(s.path) if s.own_requests else f"**{md(s.workload)}** ({code(s.path)})")
        + f", {s.duration:g}s per level after {s.warmup:g}s warm-up, "
        f"isolation: {md(s.isolation)}. Machine: {md(m.cpu_model)}, {m.cores} cores, "
        f"{md(m.os)}.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---:" if i else "---" for i in range(len(COLUMNS))) + "|",
    ]
    lines += ["| " + " | ".join(md(c) for c in r) + " |" for r in rows(run)]
    lines.append("")
    lines += [f"- {md(breaking_line(st, run))}" for st in run.stacks]
    notes = notes_lines(run)
    if notes:
        lines.append("")
        lines += [f"- † {md(n)}" for n in notes]
    lines.append("")
    lines.append(
        " ".join(legend(run, markdown=True)) + " *req/s*: answers that count (2xx/3xx or "
        "the expected statuses); the others are in *failures*. *waiting*: requests sent "
        "and not answered when the level ended (the oldest's age in brackets)."
    )
    repeats = max((len(lv.samples) for st in run.stacks for lv in st.levels), default=1)
    if repeats > 1 and not run.settings.rounds:
        lines.append(
            f"Levels were measured up to {repeats} times in a row (a run from before rounds): "
            "*req/s* is every repeat pooled (all answers over all measured time), the lowest "
            "and highest repeat in brackets (a range, no interval); latencies, failures and "
            "waiting are of all repeats together, cpu the median repeat's."
        )
    elif repeats > 1:
        lines.append(
            f"Levels were measured in up to {repeats} rounds (each round every level again, "
            "in a shuffled order, each a fresh measurement): *req/s* is every round pooled "
            "(all answers over all measured time), in brackets the 90 % interval the next "
            "run's figure falls in, from the spread between rounds; latencies, failures and "
            "waiting are of all rounds together, cpu the median round's."
        )
    if run.interrupted:
        lines.append(f"The run was interrupted ({md(run.interrupted)}): later levels are missing.")
    then_now = thennow.markdown(run)  # the replayed experiment's figures and claims, if any
    if then_now:
        lines += ["", then_now]
    return "\n".join(lines) + "\n"


MARKS = {
    "✗": "marks each stack's breaking point (the rules: stackrace's docs/verdicts.md)",
    "†": "a level whose figures come with a note (its † line says which)",
}


def legend(run: BenchRun, markdown: bool = False) -> list[str]:
    """What every mark and word of the table that is not a figure means, one sentence
    each, for the marks and words the table holds (a table says what its ✗ is)."""
    cells = [c for r in rows(run) for c in r[1:]]
    out = [f"{mark} {meaning}." for mark, meaning in MARKS.items() if any(mark in c for c in cells)]
    if not markdown:  # (the Markdown says what its columns hold after the legend)
        if any(c == NO_ANSWERS for c in cells):
            out.append(f"{NO_ANSWERS}: nothing came back at that level, so no latency.")
        if any(c == NOT_SAMPLED for c in cells):
            out.append(f"{NOT_SAMPLED}: a server started by you without --pid.")
        if any(c.endswith(")") and "(" in c for r in rows(run) for c in (r[2], r[7])):
            said = (
                "the 90 % interval from the rounds"
                if run.settings.rounds
                else "the lowest–highest repeat"
            )
            out.append(f"In brackets: {said} (req/s); the oldest wait (waiting).")
    return out


def notes_lines(run: BenchRun) -> list[str]:
    out = list(run.notes)
    for st in run.stacks:
        judged = judgments(st, run)
        for lv in st.levels:
            for f in flags(lv, judged.get(lv.level), run.settings.rounds):
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
            "state",  # the rules' judgment of the level (docs/verdicts.md)
            "why",
        ]
    )
    for st in run.stacks:
        judged = judgments(st, run)
        broke = breaking(st, run)
        for lv in st.levels:
            j = judged.get(lv.level)
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
                    int(broke is not None and broke.level == lv.level),
                    len(lv.samples) or 1,
                    *(f"{x:.1f}" for x in lv.rps_range),
                    j.state if j is not None else "",
                    j.why if j is not None else "",
                ]
            )
    return buf.getvalue()


def rich_table(run: BenchRun, title: str | None = None) -> Table:
    from rich.table import Table  # lazy: keeps --help fast

    # names are user text (`gunicorn-sync[app]`): never rich markup, never a control byte;
    # every mark in the table is said under it (a ✗ nothing explained read as an error)
    caption = "\n".join(legend(run)) or None
    table = Table(
        title=printable.markup(title) if title else None,
        header_style="bold",
        caption=printable.markup(caption, newlines=True) if caption else None,
        caption_justify="left",
    )
    for i, col in enumerate(COLUMNS):
        table.add_column(col, justify="left" if i == 0 else "right")
    previous = None
    for r in rows(run):
        if previous is not None and r[0] != previous:
            table.add_section()
        previous = r[0]
        style = "red" if "✗" in r[1] else None  # (" ✗ †": a break with a note)
        table.add_row(*(printable.markup(c) for c in r), style=style)
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
