"""`stackrace bench`'s options and help: the race settings grouped by what a person
wants to do (each declared once, with its default, in settings/race_settings.py), the
capacity search's and the outputs' own options, and the Examples; and the command line
read into its frozen `BenchOptions` (with `RaceOptions`, what to race, which tune's
plan shares), so that nothing past this module knows argparse."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stackrace.cluster.options import ClusterOptions
from stackrace.commands import runguard
from stackrace.commands.cluster_args import add_cluster_arguments, cluster_options
from stackrace.commands.metrics_args import add_metrics_arguments, metrics_options
from stackrace.commands.namespace import typed_options
from stackrace.commands.output_args import (
    OutputFiles,
    add_allow_remote_argument,
    add_gate_arguments,
    add_json_file_argument,
    add_junit_argument,
    add_no_progress_argument,
    add_table_arguments,
    output_options,
)
from stackrace.commands.parser import describe, examples
from stackrace.commands.settings_args import add_options, add_preset_argument, given
from stackrace.commands.target_args import (
    TargetOptions,
    add_url_arguments,
    add_your_app_arguments,
    target_options,
)
from stackrace.settings.parsers import positive_duration
from stackrace.settings.parsers import precision as precision_share

if TYPE_CHECKING:
    from stackrace.metrics.exporter import MetricsOptions

# the race settings by what a person wants to do (each declared once, with its default:
# settings/race_settings.py); every one of them is in exactly one group
WHAT = ("stacks", "workload", "io_ms", "queries")
LEVELS = (
    "concurrency_levels", "duration", "warmup", "warmup_requests", "rate", "rate_connections",
    "requests", "repeat", "isolation",
)  # fmt: skip
HOW = (
    "keepalive", "timeout", "tls_verify", "cacert", "tls_resume", "http2", "streams", "clients",
    "slow_share", "cpus", "memory_max",
)  # fmt: skip
REQUESTS = ("paths", "method", "header", "body", "body_file", "scenario", "expect_status")
SLO_HELP = (
    "the objective every level is held to, targets to stay below, e.g. "
    "'p99<50ms,failures<0.1%%' (a percentile p0-p100, mean, max, failures, waiting, rss, "
    "cpu): a level that misses it fails the run (exit 1) and its JUnit test case; "
    "--capacity searches under it (default: none)"
)
EXAMPLES = examples(
    (
        "stackrace bench --stacks gunicorn-sync,uvicorn --concurrency 10,100",
        "two stacks, two levels each",
    ),
    ("stackrace bench --preset php-vs-python-hello --json run.json", "a stored scenario, saved"),
    (
        "stackrace bench --stacks uvicorn --baseline run.json --fail-on 'qps<-10%'",
        "a regression gate against a saved run",
    ),
    (
        "stackrace bench --stacks uvicorn --capacity --slo 'p99<100ms' --budget 2m",
        "the most load each stack serves under an SLO",
    ),
    (
        "stackrace bench --url mine=http://127.0.0.1:8000 --stacks uvicorn",
        "a server you started, raced beside a stack",
    ),
)


def add_bench_arguments(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "Compare stacks headless, level by level: a table, files (JSON, CSV, Markdown, "
        "SVG, JUnit), a verdict per level, and an exit status a CI job can use.",
        EXAMPLES,
        "docs/bench.md, docs/tune.md",
    )
    what = p.add_argument_group("what to race")
    add_options(what, only=WHAT)
    add_preset_argument(
        what,
        "a stored scenario from presets/ (its settings are the defaults; options given here "
        "override them)",
    )
    what.add_argument(
        "--from",
        dest="from_run",
        metavar="RUN.json",
        help="run a saved run again: its settings and stack names (options given here "
        "override the settings); the stacks are those of the stacks file in use, never "
        "commands from the run file",
    )
    what.add_argument(
        "--accept-definition-changes",
        action="store_true",
        help="with --from: run even when the stacks file defines the run's stacks "
        "differently now (refused otherwise)",
    )
    add_options(p.add_argument_group("the levels"), only=LEVELS)
    add_options(p.add_argument_group("how each stack is loaded"), only=HOW)
    add_options(p.add_argument_group("your requests (instead of the workload's)"), only=REQUESTS)
    servers = p.add_argument_group("servers you started (docs/your-app.md)")
    add_url_arguments(servers)  # --url [NAME=]URL, --pid: as in the app
    add_allow_remote_argument(
        servers, "allow a --url host that is not on this machine (default: loopback only)"
    )
    add_your_app_arguments(p.add_argument_group("your app on every server (docs/your-app.md)"))
    out = p.add_argument_group("what it writes")
    add_json_file_argument(
        out, "write the run here (versioned schema; `stackrace report` reads it)"
    )
    add_table_arguments(out)
    add_page_arguments(out)
    add_junit_argument(
        out,
        "write JUnit XML here: a test case per stack and level, the gate's crossed rules as "
        "failures",
    )
    add_no_progress_argument(out)
    add_metrics_arguments(out)
    verdicts = p.add_argument_group("pass or fail (docs/bench.md)")
    add_options(verdicts, only=("slo",), helps={"slo": SLO_HELP})
    add_gate_arguments(
        verdicts,
        baseline="a saved run to compare against (with --fail-on)",
        what="the run when a level",
    )
    add_capacity_arguments(p.add_argument_group("capacity under the SLO (docs/tune.md)"))
    runguard.add_run_arguments(p.add_argument_group("journal, resume, other runs (docs/tune.md)"))
    add_cluster_arguments(p)


def add_capacity_arguments(group: argparse._ArgumentGroup) -> None:
    """--capacity, --budget, --precision (bench; tune takes --budget and --precision)."""
    group.add_argument(
        "--capacity",
        action="store_true",
        help="instead of the levels, search each stack's capacity under --slo: the highest "
        "concurrency (from the first --concurrency) or, with --rate, the highest rate (from "
        "it) that meets the SLO, by bracketing then bisection, confirmed by repeats and a "
        "re-check of the break",
    )
    add_search_arguments(group)


def add_search_arguments(
    group: argparse._ArgumentGroup,
    per: str = "per stack",
    budget: str = "no limit",
    precision: str = "5%%",
) -> None:
    """--budget and --precision; `per`: what one budget is for; `budget`, `precision`:
    their defaults (tune's rounds measure the answers again, so it settles for less)."""
    group.add_argument(
        "--budget",
        type=positive_duration,
        default=None,
        metavar="TIME",
        help=f"time a search may take ({per}), e.g. 3m; it ends on the bracket it got to, "
        f"and says so (default: {budget})",
    )
    group.add_argument(
        "--precision",
        type=precision_share,
        default=None,
        metavar="SHARE",
        help="a search stops when the gap between a pass and a miss is within this share "
        f"of the pass (default {precision})",
    )


def add_page_arguments(group: argparse._ArgumentGroup) -> None:
    """--html, --series-csv and --flame: the run over time, and why it broke (bench,
    report)."""
    group.add_argument(
        "--html",
        dest="html_out",
        metavar="FILE",
        help="write one self-contained HTML page here: every stack over time, the breaking "
        "points, the tables (opens offline; with --baseline, both runs compared)",
    )
    group.add_argument(
        "--series-csv",
        dest="series_csv_out",
        metavar="FILE",
        help="write the run second by second here: one row per stack per second",
    )
    group.add_argument(
        "--flame",
        dest="flame_dir",
        metavar="DIR",
        help="write a flame graph (SVG) of each evidence window here, one file per stack "
        'and breaking level (docs/bench.md, "Why it broke")',
    )


@dataclass(frozen=True)
class RaceOptions:
    """What to race, as given: the settings options (by field; unset ones absent), a
    preset or a run to run again, the stacks file, the servers and app given, the
    cluster. Bench's and tune's plans are built from it (commands/bench_plan.py)."""

    given: Mapping[str, Any] = field(default_factory=dict)
    preset: str | None = None
    from_run: str | None = None  # --from RUN.json, or the journal resumed
    accept_definition_changes: bool = False
    stacks_file: str | None = None
    target: TargetOptions = field(default_factory=TargetOptions)
    cluster: ClusterOptions = field(default_factory=ClusterOptions)


def race_options(args: argparse.Namespace) -> RaceOptions:
    return typed_options(
        RaceOptions, args, given=given(args), target=target_options(args),
        cluster=cluster_options(args),
    )  # fmt: skip


@dataclass(frozen=True)
class BenchOptions:
    """`stackrace bench`'s command line, typed."""

    race: RaceOptions
    files: OutputFiles = field(default_factory=OutputFiles)
    baseline: str | None = None
    fail_on: str | None = None
    capacity: bool = False
    budget: float | None = None  # seconds
    precision: float | None = None
    no_progress: bool = False
    guard: runguard.RunGuardOptions = field(default_factory=runguard.RunGuardOptions)
    metrics: MetricsOptions | None = None


def bench_options(args: argparse.Namespace) -> BenchOptions:
    return typed_options(
        BenchOptions, args, race=race_options(args), files=output_options(args),
        guard=runguard.run_guard_options(args), metrics=metrics_options(args),
    )  # fmt: skip
