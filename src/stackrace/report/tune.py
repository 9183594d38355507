"""A tune's answer in words: the lines `stackrace tune` prints and its Markdown file.

    for line in text_lines(run): print(line)
    markdown(run)     # the same, as a document: verdict, deploy line, points, noise

Both carry the same things, in the same order (report/schema.TuneResult, Noise): every
point tried with its capacity and 90 % interval, best first; the verdict (a winner with
its confidence, a tie within noise, or not decided: never a winner from an interrupted
or undecided search); the deploy line with the app it serves and the server's version
it needs; where the configurations ran and what that means for a deploy; whether the
best lies on an edge of the range; the points not measured; the machine's noise.
"""

from __future__ import annotations

import re

from stackrace.base import printable
from stackrace.base.printable import markdown as md
from stackrace.base.printable import markdown_code as code
from stackrace.report.schema import BenchRun, TunePoint, TuneResult
from stackrace.report.why import cause_removed
from stackrace.settings.parsers import COMMAND_LINE
from stackrace.stacks.catalogue import StackFile
from stackrace.stacks.definition import Stack
from stackrace.stacks.production import production_command
from stackrace.stacks.variants import resolve

MAX_DEPLOY_LINES = 3  # a tie's deploy lines shown

HEADER = [
    "#",
    "configuration",
    "capacity under the SLO",
    "90 % interval",
    "measurements",
    "found in",
]


def _row(n: int, p: TunePoint) -> list[str]:
    cap = "cannot meet" if p.capacity <= 0 else f"{p.capacity:,.0f} req/s"
    interval = "-" if p.capacity <= 0 else f"{p.lo:,.0f}–{p.hi:,.0f}"
    if p.capacity > 0 and p.repeats < 2:
        interval = "one round: no interval"  # an interval comes from rounds only
    if p.unstable:
        cap += f" (unstable c={p.unstable[0]:g}–{p.unstable[1]:g})"
    return [str(n), p.name, cap, interval, str(p.repeats), p.phase]


def table(t: TuneResult) -> list[list[str]]:
    return [HEADER] + [_row(n, p) for n, p in enumerate(t.points, 1)]


def _pad(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _facts(run: BenchRun) -> list[tuple[str, str]]:
    """(label, text) of everything after the table, in order."""
    t = run.tune
    assert t is not None
    out: list[tuple[str, str]] = [("verdict", t.verdict)]
    if t.deploy:
        out.append(("run it in production", t.deploy))
    if t.deploy_note:
        out.append(("about that line", t.deploy_note))
    if t.placement:
        out.append(("for this machine", t.placement))
    out += [("edge", e) for e in t.edges]
    n = len(t.points)
    tried = f"{n} configuration{'s' if n != 1 else ''} measured"
    if t.rounds:
        rounds = f"{t.rounds} interleaved round{'s' if t.rounds != 1 else ''}"
        tried += f", the leaders in {rounds} (order shuffled each round)"
    if t.not_measured:
        shown = ", ".join(t.not_measured[:12]) + (" …" if len(t.not_measured) > 12 else "")
        tried += f"; not measured ({len(t.not_measured)}): {shown}"
    out.append(("points tried", tried))
    if t.stopped:
        out.append(("search ended", t.stopped))
    if run.noise is not None and run.noise.sentence:
        out.append(("noise", run.noise.sentence))
    out += [("note", n) for n in run.notes]
    return out


def text_lines(run: BenchRun) -> list[str]:
    t = run.tune
    if t is None:
        return []
    slo = run.settings.slo or ""
    lines = [f"Capacity under the SLO ({slo}), best first:"]
    lines += ["  " + line for line in _pad(table(t))]
    for label, text in _facts(run):
        lines.append(text if label == "verdict" else f"{label}: {text}")
    return lines


def markdown(run: BenchRun) -> str:
    t = run.tune
    if t is None:
        return ""
    m = run.machine
    slo = run.settings.slo or ""
    servers = ", ".join(t.stacks)
    # a run file's text, every piece escaped for Markdown (stackrace.base.printable)
    lines = [
        f"# stackrace tune {md(servers)}: capacity under {code(slo)}",
        "",
        f"{md(run.settings.workload)} ({code(run.settings.path)}) on {md(m.cpu_model)}, "
        f"{m.cores} cores, {md(m.os)}; {md(run.started)}."
        + (f" **Interrupted ({md(run.interrupted)})**." if run.interrupted else ""),
        "",
        f"**{md(t.verdict)}**",
        "",
    ]
    if t.deploy:
        deploy = printable.terminal(t.deploy)
        # a fence longer than any run of backticks in the line: nothing in it ends it
        fence = "`" * max(3, 1 + max((len(r) for r in re.findall(r"`+", deploy)), default=0))
        lines += ["Run it in production:", "", f"{fence}sh", deploy, fence, ""]
    if t.deploy_note:
        lines += [md(t.deploy_note), ""]
    rows = table(t)
    lines.append("| " + " | ".join(md(c) for c in rows[0]) + " |")
    lines.append("|" + "---|" * len(rows[0]))
    lines += ["| " + " | ".join(md(c) for c in r) + " |" for r in rows[1:]]
    lines.append("")
    for label, text in _facts(run):
        if label in ("verdict", "run it in production", "about that line"):
            continue
        lines.append(f"- **{md(label)}**: {md(text)}")
    return "\n".join(lines) + "\n"


def met_any(t: TuneResult) -> bool:
    """Whether any configuration met the SLO at some load (a capacity above 0)."""
    return any(p.capacity > 0 for p in t.points)


def add_deploy(result: BenchRun, stacks: StackFile) -> None:
    """The deploy line of the winner (or of each configuration tied); none when no
    configuration met the SLO: "run it in production" under "no configuration met the
    SLO" would recommend what failed it."""
    t = result.tune
    if t is None or not met_any(t):
        return
    names = [t.winner] if t.winner else t.tied[:MAX_DEPLOY_LINES]
    app = stacks.app
    versions = {st.name: st.version for st in result.stacks}
    lines = []
    for name in names:
        if (
            name is None
            or name not in versions
            or ("[app]" not in name and not _is_stack(name, stacks))
        ):
            continue
        # printed, never run: the command the run measured, as the run names it
        stack: Stack = resolve(name, stacks, named_in=COMMAND_LINE)
        base = stacks.get(name.partition(":")[0].replace("[app]", ""))
        requires = list(base.app.pip) if "[app]" in name and base and base.app else None
        prod = production_command(
            stack, requires, versions.get(name, ""), app.target if app and "[app]" in name else None
        )
        lines.append((name, prod))
    if not lines:
        return
    if t.winner:
        name, prod = lines[0]
        removed = cause_removed(result, name)  # the cause the winner removed (report/why.py)
        if prod.command:
            t.deploy = prod.command
            t.deploy_note = "; ".join(x for x in (prod.app, prod.requires, prod.note, removed) if x)
        else:
            t.deploy_note = f"no production command line: {prod.note}"
        return
    shown = [f"{name}: {prod.command or prod.note}" for name, prod in lines]
    t.deploy_note = (
        "tied within noise: any of these will do on this machine: "
        + " | ".join(shown)
        + "; "
        + "; ".join(x for x in (lines[0][1].app, lines[0][1].requires) if x)
    )


def _is_stack(name: str, stacks: StackFile) -> bool:
    return name.partition(":")[0] in stacks
