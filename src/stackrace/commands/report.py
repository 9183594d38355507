"""`stackrace report RUN.json …`: render saved runs again, or compare them side by side.

Tune runs and `bench --capacity` runs (every stack with a capacity under the SLO) are
compared by capacity: candidate by candidate, each run's req/s under the SLO and the
load it held, the change against the first run, and each run's winner — so "did the
new release change which configuration wins, and by how much" is one command.

Exit status: 0; 1 when the gate (--baseline, or absolute --fail-on rules) fails; 2 for a
usage error or a run file that cannot be read; 74 when a file could not be written (the
figures are printed all the same)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

from stackrace.base import printable
from stackrace.base.atomicfile import write_atomic
from stackrace.commands.bench_args import add_page_arguments
from stackrace.commands.namespace import typed_options
from stackrace.commands.output_args import (
    OutputFiles,
    add_gate_arguments,
    add_junit_argument,
    add_table_arguments,
    output_options,
)
from stackrace.commands.parser import describe, examples
from stackrace.report import capacity as captable
from stackrace.report import gate
from stackrace.report.junit import junit_xml
from stackrace.report.schema import BenchRun, StackResult
from stackrace.report.why import write_flames
from stackrace.report.write import (
    EXIT_NOT_WRITTEN,
    check_output_paths,
    print_run,
    read_run,
    run_outputs,
    write_files,
)
from stackrace.settings.units import fmt_us

EXAMPLES = examples(
    ("stackrace report run.json", "render a saved run again"),
    ("stackrace report old.json new.json", "two runs side by side, with the change"),
    ("stackrace report run.json --markdown run.md --chart run.svg", "its table and chart"),
    ("stackrace report run.json --html run.html", "one page to hand on, offline"),
    ("stackrace report old.json new.json --html diff.html", "two runs on the same axes"),
    (
        "stackrace report new.json --baseline old.json --fail-on 'qps<-10%'",
        "the regression gate on saved runs",
    ),
)


def register(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "Render saved bench runs again, or compare them: tables, files, and the regression "
        "gate, with no load.",
        EXAMPLES,
        "docs/bench.md",
    )
    p.add_argument(
        "runs", nargs="+", metavar="RUN.json", help="run files written by `stackrace bench --json`"
    )
    out = p.add_argument_group("what it writes")
    add_table_arguments(out)
    add_page_arguments(out)
    gate = p.add_argument_group("pass or fail")
    add_junit_argument(
        gate, "write JUnit XML of the (last) run here, judged against --baseline if given"
    )
    add_gate_arguments(
        gate,
        baseline="judge the (single) run against this one",
        what="when a level of the (last) run",
    )
    p.set_defaults(func=run, read_options=report_options)


@dataclass(frozen=True)
class ReportOptions:
    """`stackrace report`'s command line, typed."""

    runs: tuple[str, ...]
    files: OutputFiles = field(default_factory=OutputFiles)
    baseline: str | None = None
    fail_on: str | None = None


def report_options(args: argparse.Namespace) -> ReportOptions:
    return typed_options(ReportOptions, args, files=output_options(args))


def run(o: ReportOptions) -> int:
    f = o.files
    problem = check_output_paths(
        {
            "--csv": f.csv_out,
            "--markdown": f.md_out,
            "--chart": f.chart_out,
            "--junit": f.junit_out,
            "--html": f.html_out,
            "--series-csv": f.series_csv_out,
        }
    )
    if problem is None and len(o.runs) > 2 and (f.html_out or f.series_csv_out):
        problem = "--html and --series-csv take one run, or two to compare"
    if problem:
        print(f"stackrace report: {problem}", file=sys.stderr)
        return 2
    # a TermError names the rule, a RunFileError the file (both exit 2, said by cli.py)
    rules = gate.check_rules(o.fail_on, o.baseline)
    runs = [read_run(r) for r in o.runs]
    base = read_run(o.baseline) if o.baseline else None
    verdict = gate.gate_verdict(runs[-1], base, rules) if rules else None
    # the page and the series: one run (beside --baseline), or `report old.json new.json`,
    # the later run drawn over the earlier one
    page_base = runs[0] if len(runs) == 2 else base
    problems = write_files(
        run_outputs(
            runs[-1], html_out=f.html_out, series_csv_out=f.series_csv_out, baseline=page_base
        )
    )
    if all(is_capacity_run(r) for r in runs) and not rules:
        for line in problems:
            print(f"stackrace report: {line}", file=sys.stderr)
        return capacity_report(runs, o) or (EXIT_NOT_WRITTEN if problems else 0)
    if len(runs) == 1:
        problems += write_files(run_outputs(runs[0], None, f.csv_out, f.md_out, f.chart_out))
    if f.flame_dir:  # every run's evidence windows, as flame graphs (report/why.py)
        for r in runs:
            written, bad = write_flames(r, f.flame_dir)
            problems += bad
            if not written and not bad:
                problems.append("--flame: the run holds no evidence window (no stack broke)")
    problems += write_files(
        [("--junit", f.junit_out, lambda: junit_xml(runs[-1], verdict, o.baseline))]
    )
    if len(runs) == 1:
        print_run(runs[0], title=o.runs[0])
    else:
        compare(runs, list(o.runs))
    if verdict is not None:
        print("\n".join(gate.verdict_lines(verdict, o.baseline)))
    for line in problems:
        print(f"stackrace report: {line}", file=sys.stderr)
    if problems:
        return EXIT_NOT_WRITTEN
    return 0 if verdict is None or verdict.ok else 1


def compare(runs: list[BenchRun], names: list[str]) -> None:
    from rich.console import Console  # lazy: keeps --help fast
    from rich.table import Table  # lazy: keeps --help fast

    table = Table(title="req/s and p99 per run; change against the first", header_style="bold")
    table.add_column("stack")
    table.add_column("level", justify="right")
    for n in names:
        table.add_column(Path(n).stem, justify="right")
    keys: list[tuple[str, int]] = []
    for r in runs:
        for st in r.stacks:
            for lv in st.levels:
                if (st.name, lv.concurrency) not in keys:
                    keys.append((st.name, lv.concurrency))
    index = [{(st.name, lv.concurrency): lv for st in r.stacks for lv in st.levels} for r in runs]
    for key in keys:
        first = index[0].get(key)
        cells = []
        for idx in index:
            cell = idx.get(key)
            if cell is None:
                cells.append("-")
                continue
            p99 = fmt_us(cell.latency.p99) if cell.answered else "no answers"
            text = f"{cell.rps:,.0f} / {p99}"
            if first is not None and cell is not first and first.rps:
                text += f" ({(cell.rps / first.rps - 1) * 100:+.0f}%)"
            cells.append(text)
        table.add_row(printable.markup(key[0]), str(key[1]), *cells)  # a name: never markup
    Console().print(table)


def is_capacity_run(run: BenchRun) -> bool:
    """A tune or `bench --capacity` run: its stacks carry capacities, not levels."""
    return (
        bool(run.stacks)
        and all(st.capacity is not None or st.error for st in run.stacks)
        and any(st.capacity is not None for st in run.stacks)
    )


def capacity_report(runs: list[BenchRun], o: ReportOptions) -> int:
    if len(runs) == 1:
        run = runs[0]
        slo = run.settings.slo or ""
        print(f"{o.runs[0]}: capacity under the SLO ({slo}), best first:")
        for line in captable.table_lines(run.stacks):
            print("  " + line)
        for line in winner_lines(run):
            print(line)
        outputs = [
            (o.files.md_out, lambda: captable.markdown(run.stacks, slo).encode()),
            (o.files.chart_out, lambda: captable.svg(run.stacks, slo).encode()),
        ]
    else:
        lines = compare_capacity(runs, list(o.runs))
        for line in lines:
            print(line)
        outputs = [(o.files.md_out, lambda: ("\n".join(lines) + "\n").encode())]
    for path, make in outputs:
        if path:
            try:
                write_atomic(Path(path), make())
            except OSError as exc:
                print(f"stackrace report: {path}: {printable.terminal(str(exc))}", file=sys.stderr)
                return EXIT_NOT_WRITTEN
    if o.files.csv_out or (len(runs) > 1 and o.files.chart_out):
        print("stackrace report: tune runs are compared as text and Markdown", file=sys.stderr)
    return 0


def winner(run: BenchRun) -> StackResult | None:
    """The candidate with the highest capacity under the SLO (None: none meets it)."""
    return next(
        (st for st in captable.ranked(run.stacks) if st.capacity and st.capacity.load is not None),
        None,
    )


def winner_lines(run: BenchRun) -> list[str]:
    best = winner(run)
    if best is None or best.capacity is None:
        return ["winner: none meets the SLO"]
    return [f"winner: {best.name}: {best.capacity.sentence}"]


def compare_capacity(runs: list[BenchRun], names: list[str]) -> list[str]:
    """Candidate by candidate: each run's capacity under its SLO (req/s ± margin, at
    the load it held) and the change against the first run; then each run's winner."""
    labels = [Path(n).name for n in names]
    slos = [r.settings.slo or "" for r in runs]
    out = [f"Capacity under the SLO per candidate; change against {labels[0]}:"]
    if len(set(slos)) > 1:
        out.append(
            "  (the runs searched under different SLOs: "
            + ", ".join(f"{lb} {s}" for lb, s in zip(labels, slos, strict=True))
            + "; their capacities answer different questions)"
        )
    order: list[str] = []
    for r in runs:
        for st in captable.ranked(r.stacks):
            if st.name not in order:
                order.append(st.name)
    index = [{st.name: st.capacity for st in r.stacks if st.capacity is not None} for r in runs]
    header = ["candidate", *labels]
    rows = []
    for name in order:
        first = index[0].get(name)
        cells = [name]
        for idx in index:
            c = idx.get(name)
            if c is None:
                cells.append("-")
                continue
            if c.capacity is None:  # cannot be met, or a search interrupted
                cells.append("cannot meet" if c.load is None else "interrupted")
                continue
            text = f"{c.capacity or 0:,.0f} req/s at {captable.at(c, c.load)}"
            if c is not first and first is not None and first.load is not None and first.capacity:
                text += f" ({((c.capacity or 0) / first.capacity - 1) * 100:+.0f}%)"
            cells.append(text)
        rows.append(cells)
    widths = [max(len(line[k]) for line in [header, *rows]) for k in range(len(header))]
    for line in [header, *rows]:
        out.append("  " + "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
    winners = []
    for label, r in zip(labels, runs, strict=True):
        best = winner(r)
        winners.append(best.name if best is not None else "none")
        out.append(f"winner of {label}: " + winner_lines(r)[0].removeprefix("winner: "))
    if len(set(winners)) > 1:
        out.append("the winner changed: " + " → ".join(winners))
    else:
        out.append(f"the same winner in every run: {winners[0]}")
    return out
