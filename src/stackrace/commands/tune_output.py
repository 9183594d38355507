"""What `stackrace tune` writes and prints when it ends: the run's files (`--json`,
`--markdown`, `--chart`), then the answer (the winner and its deploy line, or a
`bench --capacity` run's table) and the exit status it makes."""

from __future__ import annotations

import os
import sys

from stackrace.commands.output_args import OutputFiles
from stackrace.report import capacity as captable
from stackrace.report import tune as tunereport
from stackrace.report.schema import BenchRun, dumps
from stackrace.report.write import EXIT_NOT_WRITTEN, write_files


def write(files: OutputFiles, result: BenchRun) -> list[str]:
    slo = result.settings.slo or ""
    return write_files(
        [
            ("--json", files.json_out, lambda: dumps(result)),
            ("--markdown", files.md_out, lambda: tunereport.markdown(result).encode()),
            ("--chart", files.chart_out, lambda: captable.svg(result.stacks, slo).encode()),
        ]
    )


def show(result: BenchRun, problems: list[str] | None = None) -> int:
    """Print the answer; the exit status (commands/tune.py's docstring says each)."""
    try:
        if result.tune is not None:
            for line in tunereport.text_lines(result):
                print(line)
        else:  # a capacity run of `bench --capacity`: its table
            print(f"Capacity under the SLO ({result.settings.slo}), best first:")
            for line in captable.table_lines(result.stacks):
                print("  " + line)
        for line in problems or []:
            print(f"stackrace tune: {line} (the figures are above)", file=sys.stderr)
    except OSError:  # the terminal was closed: the files hold it
        sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (for the exit flush)
    if problems:
        return EXIT_NOT_WRITTEN
    t = result.tune
    if t is None:
        return 0 if any(st.capacity and st.capacity.claimed for st in result.stacks) else 1
    # 1 when no configuration met the SLO (nothing to deploy), or none was named
    return 0 if tunereport.met_any(t) and (t.winner or len(t.tied) > 1) else 1
