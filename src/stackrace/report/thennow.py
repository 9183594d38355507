"""The then/now tables of a run that replays a classic experiment: the original's figures
beside this run's (with ranks), and each claim's verdict (stackrace.report.claims).

Both `stackrace bench` and `stackrace report` print them (rich) and write them into the
Markdown output, under the run's own table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackrace.base import printable
from stackrace.report import claims
from stackrace.report.schema import BenchRun

if TYPE_CHECKING:
    from rich.console import Console


def _title(run: BenchRun) -> str:
    assert run.then is not None
    head = f"Then beside now: experiment {run.then.experiment}"
    return f"{head} ({run.then.source})" if run.then.source else head


def _rank(rank: int | None) -> str:
    return "-" if rank is None else f"#{rank}"


def figure_cells(run: BenchRun) -> list[list[str]]:
    out = []
    for row in claims.figure_rows(run):
        fig = row.figure
        out.append(
            [
                fig.stack + (f" ({fig.label})" if fig.label else ""),
                "-" if row.level is None else str(row.level),
                f"{fig.then:,.0f}",
                _rank(row.then_rank),
                "-" if row.now is None else f"{row.now:,.0f}",
                _rank(row.now_rank),
            ]
        )
    return out


FIGURE_COLUMNS = ("stack", "c", "req/s then", "rank then", "req/s now", "rank now")
CLAIM_COLUMNS = ("claim", "then", "now", "verdict", "why")


def claim_cells(verdicts: list[claims.ClaimVerdict]) -> list[list[str]]:
    out = []
    for v in verdicts:
        reason = v.reason
        if v.claim.why and v.status != claims.UNTESTABLE:  # (for those, the reason is the why)
            reason += f". Note: {v.claim.why}"
        out.append([f"{v.claim.id}: {v.claim.text}", v.then, v.now, v.status, reason])
    return out


def _md_row(cells: list[str]) -> str:
    # a preset's and a run file's text: every cell escaped for Markdown (HTML, `|`, …)
    return "| " + " | ".join(printable.markdown(c) for c in cells) + " |"


def markdown(run: BenchRun) -> str:
    """The then/now section for a Markdown report; "" when the run replays nothing."""
    if run.then is None:
        return ""
    verdicts = claims.claim_verdicts(run)
    lines = [f"### {printable.markdown(_title(run))}", ""]
    figures = figure_cells(run)
    if figures:
        lines += [
            "Figures (req/s are not comparable across hardware; ranks are):",
            "",
            "| " + " | ".join(FIGURE_COLUMNS) + " |",
            "|---|" + "---:|" * (len(FIGURE_COLUMNS) - 1),
            *(_md_row(r) for r in figures),
            "",
        ]
    if verdicts:
        lines += [
            f"Claims: {printable.markdown(claims.summary(verdicts))}.",
            "",
            "| " + " | ".join(CLAIM_COLUMNS) + " |",
            "|---|---:|---:|---|---|",
            *(_md_row(r) for r in claim_cells(verdicts)),
            "",
        ]
    return "\n".join(lines)


def print_then_now(run: BenchRun, console: Console) -> None:
    if run.then is None:
        return
    from rich.table import Table  # lazy: keeps --help fast

    figures = figure_cells(run)
    if figures:
        table = Table(title=printable.markup(_title(run)), header_style="bold")
        for i, col in enumerate(FIGURE_COLUMNS):
            table.add_column(col, justify="left" if i == 0 else "right")
        for r in figures:
            table.add_row(*(printable.markup(c) for c in r))
        console.print(table)
    verdicts = claims.claim_verdicts(run)
    if not verdicts:
        return
    table = Table(
        title=printable.markup(
            f"Claims of experiment {run.then.experiment}: {claims.summary(verdicts)}"
        ),
        header_style="bold",
    )
    for col in CLAIM_COLUMNS:
        table.add_column(col, justify="right" if col in ("then", "now") else "left")
    style = {claims.HOLDS: "green", claims.FAILS: "red", claims.UNTESTABLE: "dim"}
    for v, r in zip(verdicts, claim_cells(verdicts), strict=True):
        table.add_row(*(printable.markup(c) for c in r), style=style[v.status])
    console.print(table)
