"""What `stackrace bench` prints when it ends: the run (or its capacities, best first,
with the noise they were measured in), then what went wrong, one line each: a stack
lost, the run interrupted, a note, a failure, the gate's verdict, a file not written."""

from __future__ import annotations

import sys

from stackrace.report import gate
from stackrace.report.capacity import table_lines as capacity_table
from stackrace.report.schema import BenchRun
from stackrace.report.slo import Slo
from stackrace.report.why import capacity_why, cause_line
from stackrace.report.write import print_run


def tell(
    result: BenchRun,
    verdict: gate.GateVerdict | None,
    baseline: str | None,
    interrupted: str | None,
    failed: list[str],
    problems: list[str],
    app_lost: str | None = None,
) -> None:
    """Print the run, then what went wrong, one line each."""
    if any(st.capacity is not None for st in result.stacks):
        slo = Slo.parse(result.settings.slo).text if result.settings.slo else ""
        print(f"Capacity under the SLO ({slo}), best first:")
        print("\n".join("  " + line for line in capacity_table(result.stacks)))
        for st in result.stacks:
            if st.capacity is not None:
                print(f"  {st.name}: {st.capacity.sentence}")
                found = capacity_why(st)  # why it missed the SLO there (report/why.py)
                if found is not None:
                    print(f"    why: {cause_line(found)}")
        if result.noise is not None and result.noise.sentence:
            print(f"  noise: {result.noise.sentence}")
    else:
        print_run(result)
    if app_lost:
        print(
            f"stackrace bench: {app_lost}: the run ended; the levels above were "
            "measured, the rest were not",
            file=sys.stderr,
        )
    elif interrupted:
        print(
            f"run interrupted ({interrupted}): the levels above were measured, the rest were not",
            file=sys.stderr,
        )
    else:
        for note in result.notes:
            print(f"! {note}", file=sys.stderr)
        for line in failed:
            print(f"stackrace bench: {line}", file=sys.stderr)
        if verdict is not None:
            print("\n".join(gate.verdict_lines(verdict, baseline)))
    for line in problems:
        print(f"stackrace bench: {line} (the figures are above)", file=sys.stderr)
