"""The options that say what a command writes and how it judges, declared once for every
command that has them: the run file (`--json`), the tables (`--csv`, `--markdown`,
`--chart`), the regression gate (`--junit`, `--baseline`, `--fail-on`), `--no-progress`
and `--allow-remote`.

Each function adds its flags with the same name, dest and parser everywhere; what may
differ between commands is only the words of a help (a command says what the file holds
for it), passed in. tests/unit/test_options_declared_once.py holds that no other module
adds these flags. The files asked for are read into `OutputFiles`, the typed group every
command that writes them carries in its options struct.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

Group = argparse.ArgumentParser | argparse._ArgumentGroup


def add_json_file_argument(group: Group, help: str) -> None:
    """--json FILE: the run written here (bench, tune)."""
    group.add_argument("--json", dest="json_out", metavar="FILE", help=help)


def add_table_arguments(
    group: Group, *, csv: bool = True, markdown: str = "write a Markdown table here"
) -> None:
    """--csv (unless `csv` is false), --markdown and --chart FILE: the run's table and
    chart (bench, report, tune)."""
    if csv:
        group.add_argument("--csv", dest="csv_out", metavar="FILE", help="write a CSV table here")
    group.add_argument("--markdown", dest="md_out", metavar="FILE", help=markdown)
    group.add_argument("--chart", dest="chart_out", metavar="FILE", help="write an SVG chart here")


def add_junit_argument(group: Group, help: str) -> None:
    group.add_argument("--junit", dest="junit_out", metavar="FILE", help=help)


def add_gate_arguments(group: Group, *, baseline: str, what: str) -> None:
    """--baseline RUN.json and --fail-on RULES (bench, report); `what`: what the rules
    judge ("a level", "a level of the (last) run")."""
    from stackrace.report.gate import DEFAULT_RULES  # lazy: keeps --help's start-up fast

    # argparse formats a help string with %: the default rules' own % are doubled
    rules = DEFAULT_RULES.replace("%", "%%")
    group.add_argument("--baseline", metavar="RUN.json", help=baseline)
    group.add_argument(
        "--fail-on",
        default=None,
        metavar="RULES",
        help=f"fail {what} crosses one of these rules: absolute ones (p99>50ms, "
        "failures>0.1%%) need no baseline, relative ones (qps<-10%%) compare with "
        f"--baseline (default with a baseline: {rules})",
    )


def add_no_progress_argument(group: Group, help: str = "no progress lines on stderr") -> None:
    group.add_argument("--no-progress", action="store_true", help=help)


def add_allow_remote_argument(group: Group, help: str) -> None:
    """--allow-remote: a target (a URL, a --db host) off this machine is refused without
    it (base/netguard.py)."""
    group.add_argument("--allow-remote", action="store_true", help=help)


# each file option's dest: the names OutputFiles' fields take
FILE_DESTS = (
    "json_out", "csv_out", "md_out", "chart_out", "junit_out", "html_out", "series_csv_out",
    "flame_dir",
)  # fmt: skip


@dataclass(frozen=True)
class OutputFiles:
    """The files a run writes, as given (None: not asked for); `offered`: the file
    options the command has at all (tune has no --csv), by dest."""

    json_out: str | None = None
    csv_out: str | None = None
    md_out: str | None = None
    chart_out: str | None = None
    junit_out: str | None = None
    html_out: str | None = None
    series_csv_out: str | None = None
    flame_dir: str | None = None
    offered: frozenset[str] = field(default=frozenset(FILE_DESTS))


def output_options(args: argparse.Namespace) -> OutputFiles:
    """The file options this command has, as given."""
    offered = frozenset(d for d in FILE_DESTS if hasattr(args, d))
    return OutputFiles(**{d: getattr(args, d) for d in offered}, offered=offered)
