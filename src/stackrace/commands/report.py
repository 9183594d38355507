"""`stackrace report RUN.json …`: render saved runs again, or compare them side by side.

Exit status: 0; 1 when the gate (--baseline, or absolute --fail-on rules) fails; 2 for a
usage error or a run file that cannot be read; 74 when a file could not be written (the
figures are printed all the same)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from stackrace.report import gate
from stackrace.report.junit import junit_xml
from stackrace.report.schema import BenchRun
from stackrace.report.write import (
    EXIT_NOT_WRITTEN,
    check_output_paths,
    print_run,
    read_run,
    write_files,
    write_outputs,
)
from stackrace.units import fmt_us

# argparse formats a help string with %: the default rules' own % are doubled
_DEFAULT_RULES = gate.DEFAULT_RULES.replace("%", "%%")


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("runs", nargs="+", help="run files written by `stackrace bench --json`")
    p.add_argument("--csv", dest="csv_out")
    p.add_argument("--markdown", dest="md_out")
    p.add_argument("--chart", dest="chart_out")
    p.add_argument(
        "--junit",
        dest="junit_out",
        help="write JUnit XML of the (last) run here, judged against --baseline if given",
    )
    p.add_argument("--baseline", help="judge the (single) run against this one")
    p.add_argument(
        "--fail-on",
        default=None,
        metavar="RULES",
        help="fail when a level of the (last) run crosses one of these rules: absolute "
        "ones (p99>50ms, failures>0.1%%) need no baseline, relative ones (qps<-10%%) "
        f"compare with --baseline (default with a baseline: {_DEFAULT_RULES})",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    problem = check_output_paths(
        {
            "--csv": args.csv_out,
            "--markdown": args.md_out,
            "--chart": args.chart_out,
            "--junit": args.junit_out,
        }
    )
    if problem:
        print(f"stackrace report: {problem}", file=sys.stderr)
        return 2
    try:
        rules = gate.check_rules(args.fail_on, args.baseline)
        runs = [read_run(r) for r in args.runs]
        base = read_run(args.baseline) if args.baseline else None
    except ValueError as exc:  # read_run names the file in every message
        print(f"stackrace report: {exc}", file=sys.stderr)
        return 2
    verdict = gate.judge(runs[-1], base, rules) if rules else None
    problems = []
    if len(runs) == 1:
        problems = write_outputs(runs[0], None, args.csv_out, args.md_out, args.chart_out)
    problems += write_files(
        [("--junit", args.junit_out, lambda: junit_xml(runs[-1], verdict, args.baseline))]
    )
    if len(runs) == 1:
        print_run(runs[0], title=args.runs[0])
    else:
        compare(runs, args.runs)
    if verdict is not None:
        print("\n".join(gate.verdict_lines(verdict, args.baseline)))
    for line in problems:
        print(f"stackrace report: {line}", file=sys.stderr)
    if problems:
        return EXIT_NOT_WRITTEN
    return 0 if verdict is None or verdict.ok else 1


def compare(runs: list[BenchRun], names: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

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
        table.add_row(key[0], str(key[1]), *cells)
    Console().print(table)
