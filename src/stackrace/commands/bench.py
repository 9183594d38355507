"""`stackrace bench`: a headless comparison that ends with a table, files and a verdict.

Its options are the race settings (settings/race_settings.py declares each once, with its
default and parser); a `--preset` supplies them, or `--from RUN.json` (a saved run: its
settings, and its stacks as the run recorded them: report/provenance.py), and options
given override them. Ctrl-C, SIGTERM or SIGHUP (the terminal closed) stops the run
between requests: every level already measured is written and printed, and the run
says it was interrupted (a capacity search keeps its probes and claims no capacity).
Every finished level and probe is also appended to a journal as it ends
(race/core/journal.py), so a `kill -9` loses nothing finished, and `bench --resume JOURNAL`
goes on from it; a run that would share its cores with another stackrace run refuses
unless `--share-cores` (commands/runguard.py).

Exit status: 0 when every stack was measured, no level failed entirely, the gate (if
any) passed and every level met the SLO (`--slo`, if any); 1 when a stack could not be
measured, a level of a stack got no success at all (requests ended and every one
failed: 100 % HTTP 404, every one refused…; see report.schema.Level.failed_entirely),
the database failed
during the run, the gate failed, or a level missed the SLO; 2 for a usage error, before
any load; 74 when the run was measured (and printed) but one of its files could not be
written; 75 when another stackrace run uses the cores (and no --share-cores); 130
when interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from stackrace.commands import runguard
from stackrace.commands._common import (
    announce,
    default_app_stacks,
    load,
    resolve_all,
    serves_workload,
)
from stackrace.commands.cluster_args import add_cluster_arguments, connect_from_args, wants_cluster
from stackrace.commands.metrics_args import add_metrics_arguments, open_metrics
from stackrace.commands.settings_args import add_options, given, stacks_written_in, with_given
from stackrace.commands.target_args import add_url_arguments
from stackrace.metrics.exporter import MetricsError, MetricsExporter
from stackrace.race.bench.protocol import BenchPlan
from stackrace.race.bench.recorder import BenchRecorder
from stackrace.race.bench.run import plan_placement, run_bench
from stackrace.race.core.capacity_run import CapacityPlan, ResumeError
from stackrace.race.core.journal import (
    CapacitySpec,
    JournalError,
    JournalStart,
    Resumed,
    read_journal,
)
from stackrace.race.core.members import RaceParts
from stackrace.race.core.placement import cpus_problem
from stackrace.race.core.presets import load_preset, preset_path
from stackrace.race.core.urls import UrlError, check_paths, url_targets
from stackrace.report import gate
from stackrace.report.capacity import table_lines as capacity_table
from stackrace.report.failures import run_failures
from stackrace.report.junit import junit_xml
from stackrace.report.provenance import definition_changes, provenance, recorded_stacks
from stackrace.report.schema import BenchRun, StackResult
from stackrace.report.slo import Slo
from stackrace.report.write import (
    EXIT_NOT_WRITTEN,
    check_output_paths,
    print_run,
    read_run,
    write_files,
    write_outputs,
)
from stackrace.settings.options import examples, positive_duration, usable_cpus
from stackrace.settings.options import precision as precision_share
from stackrace.settings.race_settings import RaceSettings
from stackrace.settings.scenario import ScenarioError
from stackrace.settings.workloads import WORKLOADS
from stackrace.stacks.catalogue import StackFile
from stackrace.stacks.definition import ConfigError

if TYPE_CHECKING:
    from stackrace.cluster.run import ClusterRun


# argparse formats a help string with %: the default rules' own % are doubled
_DEFAULT_RULES = gate.DEFAULT_RULES.replace("%", "%%")


# the race settings by what a person wants to do (each declared once, with its default:
# settings/race_settings.py); every one of them is in exactly one group
WHAT = ("stacks", "workload", "io_ms", "queries")
LEVELS = (
    "concurrency_levels", "duration", "warmup", "warmup_requests", "rate", "rate_connections",
    "requests", "repeat", "isolation",
)  # fmt: skip
HOW = (
    "keepalive", "timeout", "tls_verify", "cacert", "tls_resume", "clients", "slow_share", "cpus",
    "memory_max",
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


def register(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Compare stacks headless, level by level: a table, files (JSON, CSV, Markdown, "
        "SVG, JUnit), a verdict per level, and an exit status a CI job can use."
    )
    p.epilog = EXAMPLES + "\n\nMore: docs/bench.md, docs/tune.md"
    what = p.add_argument_group("what to race")
    add_options(what, only=WHAT)
    what.add_argument(
        "--preset",
        metavar="NAME",
        help="a stored scenario from presets/ (its settings are the defaults; options given "
        "here override them)",
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
    servers.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a --url host that is not on this machine (default: loopback only)",
    )
    from stackrace.commands.target_args import add_your_app_arguments

    add_your_app_arguments(p.add_argument_group("your app on every server (docs/your-app.md)"))
    out = p.add_argument_group("what it writes")
    out.add_argument(
        "--json",
        dest="json_out",
        metavar="FILE",
        help="write the run here (versioned schema; `stackrace report` reads it)",
    )
    out.add_argument("--csv", dest="csv_out", metavar="FILE", help="write a CSV table here")
    out.add_argument(
        "--markdown", dest="md_out", metavar="FILE", help="write a Markdown table here"
    )
    out.add_argument("--chart", dest="chart_out", metavar="FILE", help="write an SVG chart here")
    out.add_argument(
        "--junit",
        dest="junit_out",
        metavar="FILE",
        help="write JUnit XML here: a test case per stack and level, the gate's "
        "crossed rules as failures",
    )
    out.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    add_metrics_arguments(out)
    verdicts = p.add_argument_group("pass or fail (docs/bench.md)")
    add_options(verdicts, only=("slo",), helps={"slo": SLO_HELP})
    verdicts.add_argument(
        "--baseline", metavar="RUN.json", help="a saved run to compare against (with --fail-on)"
    )
    verdicts.add_argument(
        "--fail-on",
        default=None,
        metavar="RULES",
        help="fail the run when a level crosses one of these rules: absolute ones "
        "(p99>50ms, failures>0.1%%) need no baseline, relative ones (qps<-10%%) compare "
        f"with --baseline (default with a baseline: {_DEFAULT_RULES})",
    )
    add_capacity_arguments(p.add_argument_group("capacity under the SLO (docs/tune.md)"))
    runguard.add_run_arguments(p.add_argument_group("journal, resume, other runs (docs/tune.md)"))
    add_cluster_arguments(p)
    p.set_defaults(func=run)


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


def capacity_plan(args: argparse.Namespace, settings: RaceSettings) -> CapacityPlan | None:
    """The search asked for, checked: it needs an objective, and a timed level."""
    if not settings.slo:
        _fail("--capacity searches under an objective: give --slo, e.g. --slo 'p99<50ms'")
        return None
    if settings.requests:
        _fail("--capacity times each probe: --requests (a level of N requests) does not apply")
        return None
    return CapacityPlan(
        settings.slo, budget_s=args.budget, precision=args.precision or CapacityPlan.precision
    )


def _fail(message: str) -> None:
    print(f"stackrace bench: {message}", file=sys.stderr)


def build_settings(args: argparse.Namespace, rerun: BenchRun | None = None) -> RaceSettings | None:
    base = rerun.settings.race_settings() if rerun is not None else RaceSettings()
    if args.preset:
        try:
            base = load_preset(args.preset).settings
        except ConfigError as exc:
            _fail(str(exc))
            return None
    return with_given(base, args)


def build_plan(
    args: argparse.Namespace, rerun: BenchRun | None = None, named_in: str | None = None
) -> tuple[BenchPlan, StackFile] | None:
    """The plan of a bench run (or of tune's); `named_in`: where the stacks were written
    when the caller knows better than the options (tune --resume: its journal)."""
    settings = build_settings(args, rerun)
    if settings is None:
        return None
    stacks = _stacks(args, rerun, settings)
    if stacks is None:
        return None
    if not settings.stacks and stacks.generated:
        chosen_names, others = default_app_stacks(stacks)
        chosen_names += [n for n, what in stacks.generated.items() if what == "--cmd"]
        if not chosen_names:
            from stackrace.stacks.userapp import install_hint

            _fail(
                f"no server that runs your app is installed where it runs ({', '.join(others)}"
                f" can): `{install_hint(stacks)}` installs the common ones there"
            )
            return None
        if others:
            from stackrace.stacks.userapp import left_out_note

            print(f"stackrace bench: {left_out_note(chosen_names, others)}", file=sys.stderr)
        settings = msgspec.structs.replace(settings, stacks=chosen_names)
    if not settings.stacks and not args.url:
        _fail("name the stacks (--stacks A,B), a --preset, or servers you started (--url)")
        return None
    if not wants_cluster(args):  # (a cluster's app node is checked once it is known)
        problem = cpus_problem(settings.cpus, usable_cpus())
        if problem:
            _fail(problem)
            return None
    if settings.own_requests:
        try:
            settings.request_kinds()  # read and checked before anything starts
        except ScenarioError as exc:
            _fail(str(exc))
            return None
    preset_file = preset_path(args.preset) if args.preset else None
    if named_in is None:
        named_in = stacks_written_in(
            args, preset_file, args.from_run if rerun is not None else None
        )
    chosen = (
        resolve_all([",".join(settings.stacks)], stacks, named_in=named_in)
        if settings.stacks
        else []
    )
    if chosen is None:
        return None
    from stackrace.stacks.userapp import missing_servers

    missing = missing_servers(settings.stacks, stacks)
    if missing:
        _fail(missing)
        return None
    if not settings.own_requests and not serves_workload(
        chosen, settings.workload, "stackrace bench"
    ):
        return None
    try:
        urls = url_targets(args.url, args.pid, args.allow_remote, [s.name for s in chosen])
        check_paths(urls, settings.own_requests)
    except UrlError as exc:
        _fail(str(exc))
        return None
    if urls and wants_cluster(args):
        _fail("--url and --cluster: a cluster run loads only the stacks it starts on its app node")
        return None
    preset = rerun.settings.preset if rerun is not None else args.preset
    plan = BenchPlan(
        stacks=chosen,
        settings=settings,
        preset=preset,
        stacks_file=args.stacks_file,
        urls=urls,
        allow_remote=args.allow_remote,
    )
    return plan, stacks


def _stacks(
    args: argparse.Namespace, rerun: BenchRun | None, settings: RaceSettings
) -> StackFile | None:
    """The stacks file in use. With --from, the run's recorded blocks are compared with
    it and never started (report/provenance.py says why): a difference in what runs is
    refused unless --accept-definition-changes. A run of your app, or of --cmd stacks,
    is run again only when the command line gives --app (or --cmd) again: the run
    file's interpreter, directory or command line is never taken from it; nor is a
    file it read its requests from."""
    if rerun is not None:
        refused = _needs_again(args, rerun)
        if refused:
            _fail(f"{args.from_run} {refused}")
            return None
    stacks = load(args, settings, "stackrace bench")
    if stacks is None or rerun is None:
        return stacks
    try:
        recorded_stacks(rerun, args.from_run)  # a malformed record is an error, not ignored
    except ConfigError as exc:
        _fail(str(exc))
        return None
    runs, described = definition_changes(rerun, stacks)
    if runs and not args.accept_definition_changes:
        _fail(
            f"{args.from_run} ran stacks defined differently from {stacks.source} now "
            f"({'; '.join(runs)}): give --accept-definition-changes to run them as "
            "defined now, or --stacks-file with the file it ran"
        )
        return None
    for line in runs + described:
        print(
            f"stackrace bench: note: {line} differs from {args.from_run}; "
            f"run as defined in {stacks.source}",
            file=sys.stderr,
        )
    return stacks


def _needs_again(args: argparse.Namespace, rerun: BenchRun) -> str:
    """What a rerun needs from the command line rather than from the run file."""
    names = [s.name for s in rerun.stacks]
    if any("[app]" in n for n in names) and not getattr(args, "app", None):
        return "raced your app: give --app (and --python, --app-dir, --env) again to run it again"
    # (a --cmd stack is resolved by name like any other: without --cmd, "no stack" says so)
    by_hand = [st.name for st in rerun.stacks if st.url]
    if by_hand and not args.url:
        return (
            f"raced servers you started ({', '.join(by_hand)}): give --url NAME=URL "
            "(and --pid) again to race them again"
        )
    s = rerun.settings
    if s.scenario and getattr(args, "scenario", None) is None:
        return f"read its requests from {s.scenario}: give --scenario FILE again"
    if s.body_file and getattr(args, "body_file", None) is None:
        return f"read its request body from {s.body_file}: give --body-file FILE again"
    return ""


def _progress(line: str) -> None:
    # the terminal may be gone (closed: EIO, SIGHUP on its way) or stderr closed: progress
    # is for a reader, and there is none; the run goes on to its files
    with contextlib.suppress(OSError):
        print(line, file=sys.stderr, flush=True)


def _quiet(line: str) -> None:
    pass


T = TypeVar("T")


async def _served(metrics: MetricsExporter | None, work: Coroutine[Any, Any, T]) -> T:
    """`work`, with the --metrics exporter serving on the same event loop meanwhile."""
    if metrics is None:
        return await work
    async with metrics.serving():
        return await work


def _resume(args: argparse.Namespace) -> tuple[JournalStart, Resumed] | None:
    """`--resume J`: the journal read and checked; None after one line. Options that
    change what is measured are refused: the rest is measured as the start was."""
    if args.from_run or args.preset:
        _fail(
            "--resume continues a journal with its own settings: --from and --preset do not apply"
        )
        return None
    changed = sorted(given(args)) + [
        f
        for f, v in (
            ("--capacity", args.capacity),
            ("--budget", args.budget),
            ("--precision", args.precision),
        )
        if v
    ]
    if changed:
        _fail(
            f"--resume continues a journal with the settings it started with: "
            f"{', '.join(changed)} would change them (start a new run instead)"
        )
        return None
    try:
        start, entries = read_journal(args.resume)
    except JournalError as exc:
        _fail(str(exc))
        return None
    if start.command != "bench":
        _fail(
            f"{args.resume}: the journal of `stackrace {start.command}`: continue it with "
            f"`stackrace {start.command} --resume {args.resume}`"
        )
        return None
    return start, Resumed(entries)


def run(args: argparse.Namespace) -> int:
    resumed: Resumed | None = None
    start: JournalStart | None = None
    if args.resume:
        got = _resume(args)
        if got is None:
            return 2
        start, resumed = got
        if start.capacity is not None:
            args.capacity = True
            args.budget, args.precision = start.capacity.budget_s, start.capacity.precision
        if args.json_out is None and args.resume.endswith(".json.journal"):
            args.json_out = args.resume.removesuffix(".journal")  # the run it was beside
    outputs = {"--json": args.json_out, "--csv": args.csv_out, "--markdown": args.md_out}
    problem = check_output_paths({**outputs, "--chart": args.chart_out, "--junit": args.junit_out})
    if problem:  # before any load: a run is never thrown away for a bad path
        print(f"stackrace bench: {problem}", file=sys.stderr)
        return 2
    try:  # before any load: a rule that cannot be judged is refused, never ignored
        rules = gate.check_rules(args.fail_on, args.baseline)
    except ValueError as exc:
        _fail(str(exc))
        return 2
    rerun: BenchRun | None = None
    if start is not None:
        rerun = start.run
        args.from_run = args.resume  # its stacks are checked as a run file's are
    elif args.from_run:
        if args.preset:
            _fail("--from and --preset both give the settings: give one of them")
            return 2
        try:
            rerun = read_run(args.from_run)
        except ValueError as exc:
            _fail(str(exc))
            return 2
    built = build_plan(args, rerun)
    if built is None:
        return 2
    plan, stacks_file = built
    if args.capacity:
        plan.capacity = capacity_plan(args, plan.settings)
        if plan.capacity is None:
            return 2
    preset = load_preset(args.preset) if args.preset else None
    baseline: BenchRun | None = None
    if args.baseline:
        try:
            baseline = read_run(args.baseline)
        except ValueError as exc:
            _fail(str(exc))
            return 2
    notes: list[str] = []
    lock = runguard.claim_cores("stackrace bench", args, notes, cluster=wants_cluster(args))
    if lock is None:
        return runguard.EXIT_SHARED
    try:
        return _run_locked(args, plan, stacks_file, rerun, preset, baseline, rules, notes, resumed)
    finally:
        lock.release()


def skeleton(plan: BenchPlan, origin: Any) -> BenchRun:
    """The run as a journal's start holds it: settings, stack names, provenance."""
    from stackrace.race.bench.recorder import new_run

    run = new_run(plan)
    run.stacks = [
        StackResult(name=s.name, title=s.title, family=s.spec.family, version="", levels=[])
        for s in plan.stacks
    ] + [
        StackResult(
            name=u.label(), title=u.url, family="external", version="", levels=[], url=u.url
        )
        for u in plan.urls
    ]
    return msgspec.structs.replace(run, provenance=origin)


def _run_locked(
    args: argparse.Namespace,
    plan: BenchPlan,
    stacks_file: StackFile,
    rerun: BenchRun | None,
    preset: Any,
    baseline: BenchRun | None,
    rules: Any,
    shared: list[str],
    resumed: Resumed | None,
) -> int:
    try:
        metrics = open_metrics(args, "stackrace bench")
    except MetricsError as exc:
        _fail(str(exc))
        return 2
    if metrics is not None:
        plan.on_core = metrics.follow_core
    # the cluster first: a refusal (no Ray, a node missing) is one line, before any
    # announcement or journal
    cluster = None
    parts: RaceParts | None = None
    if wants_cluster(args):  # the stacks on the app node, the engines on the load nodes
        from stackrace.cluster.errors import ClusterError
        from stackrace.cluster.frontends import bench_parts

        cluster = connect_from_args(args, "stackrace bench")
        if cluster is None:
            if metrics is not None:
                metrics.close()
            return 2
        try:
            parts = bench_parts(cluster)
            problem = cpus_problem(plan.settings.cpus, parts.cores, engine_here=False)
            if problem:
                raise ClusterError(f"{problem} (the app node)")
        except ClusterError as exc:
            cluster.close()
            if metrics is not None:
                metrics.close()
            _fail(str(exc))
            return 2
    if plan.stacks:  # before anything of the stacks files runs (--url alone runs none)
        from stackrace.base.paths import writable_dir
        from stackrace.stacks.run_roots import RUNS_MADE_FOR, runs_dir

        if not wants_cluster(args):  # (a cluster's stacks run on its app node)
            # a read-only or full home: one line now, not after the first progress lines
            writable_dir(runs_dir(), "its run directories", "STACKRACE_RUNS_DIR", RUNS_MADE_FOR)
        announce(stacks_file, "stackrace bench", quiet=args.no_progress)
    progress: Callable[[str], None] = _quiet if args.no_progress else _progress
    # where the run came from: what `bench --from` needs to run it again
    origin = provenance(plan.stacks, stacks_file, rerun_of=args.from_run)
    if resumed is not None:
        from stackrace.race.core.journal import Journal

        plan.resume = resumed
        try:
            plan.journal = Journal.reopen(Path(args.resume))
        except OSError as exc:
            _fail(f"{args.resume}: cannot append to it: {exc.strerror or exc}")
            _close(cluster, metrics)
            return 2
        progress(
            f"resuming {args.resume}: {resumed.work} levels and probes measured before, "
            f"{len(resumed.done)} stacks done"
        )
    else:
        try:
            where = runguard.journal_path(
                args.journal, [args.json_out, args.csv_out, args.md_out], "bench"
            )
        except OSError as exc:
            _fail(str(exc))
            _close(cluster, metrics)
            return 2
        start = JournalStart(
            command="bench",
            run=skeleton(plan, origin),
            capacity=CapacitySpec(plan.capacity.budget_s, plan.capacity.precision)
            if plan.capacity is not None
            else None,
        )
        plan.journal = runguard.open_journal("stackrace bench", where, start)
        if plan.journal is not None:
            progress(f"journal: {where} (every finished level and probe; --resume continues it)")
    if plan.capacity is not None:
        from stackrace.race.core.noise import NoiseMeter

        plan.noise = NoiseMeter()
    db = None
    before: list[float] = []
    try:
        if WORKLOADS[plan.settings.workload].needs_db and cluster is None:
            from stackrace.commands.db_hook import open_for_workload

            opened = open_for_workload()
            if opened is None:
                runguard.finish_journal(plan.journal, None, keep=False)  # it holds nothing
                return 2
            db, plan.db_env = opened
            from stackrace.db.watch import DbWatch

            plan.database = DbWatch(db.settings)
        placement, why = plan_placement(plan.settings, plan.members, parts)
        recorder = BenchRecorder(plan, placement, why)
        recorder.run.notes.extend(runguard.shared_notes(shared))
        try:
            interrupted = asyncio.run(
                _served(
                    metrics, _run_interruptible(plan, recorder, parts, cluster, progress, before)
                )
            )
        except ResumeError as exc:
            _fail(f"{args.resume}: {exc}")
            return 2
        result = recorder.finish(interrupted)
        result = msgspec.structs.replace(result, provenance=origin)
        if plan.noise is not None:
            result.noise = _noise(result, before, shared)
        if preset is not None:  # a replayed experiment: its figures and claims go with the run
            result = msgspec.structs.replace(result, then=preset.then())
        elif rerun is not None and rerun.then is not None:
            result = msgspec.structs.replace(result, then=rerun.then)
        verdict = None
        if rules and interrupted is None:
            verdict = gate.judge(result, baseline, rules)
            if verdict.uncertain:
                result = asyncio.run(
                    _served(metrics, _remeasure(plan, result, verdict.uncertain, parts, progress))
                )
                verdict = gate.judge(result, baseline, rules)
        if plan.settings.slo and interrupted is None:  # held to it, baseline or not
            verdict = gate.judge_slo(result, Slo.parse(plan.settings.slo), verdict)
            for st in result.stacks:  # a capacity search that found no load meeting it
                if st.capacity is not None and st.capacity.load is None:
                    verdict.slo_missed.append(f"{st.name}: {st.capacity.sentence}")
    finally:
        if db is not None:
            db.close()
        if cluster is not None:
            cluster.close()
        if metrics is not None:
            metrics.close()
        if plan.journal is not None and not plan.journal.closed:
            # an exception on the way out: whatever it holds stays for --resume
            plan.journal.close()
    # the files first: after SIGHUP the terminal is gone and every print may fail, and
    # a signal now must not cost the run (it is over: only writing is left)
    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    result.journal = str(plan.journal.path) if plan.journal is not None and interrupted else ""
    problems = write_outputs(result, args.json_out, args.csv_out, args.md_out, args.chart_out)
    problems += write_files(
        [("--junit", args.junit_out, lambda: junit_xml(result, verdict, args.baseline))]
    )
    kept = runguard.finish_journal(plan.journal, interrupted, keep=bool(problems))
    failed = _failures(result)
    # a lost app host ended the run: not the user's interruption (exit 1, named)
    app_lost = cluster.app_lost if interrupted and cluster is not None else None
    try:
        _tell(result, verdict, args.baseline, interrupted, failed, problems, app_lost)
        if kept and interrupted:
            print(
                f"stackrace bench: every finished level and probe is in {kept}: "
                f"`stackrace bench --resume {kept}` measures the rest",
                file=sys.stderr,
            )
    except OSError:  # the terminal was closed (EIO) or the pipe is gone: the files hold it
        sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (for the exit flush)
    if app_lost:
        return 1
    if interrupted:
        return 130
    if problems:
        return EXIT_NOT_WRITTEN
    if verdict is not None and not verdict.ok:
        return 1
    return 1 if failed else 0


def _noise(result: BenchRun, before: list[float], shared: list[str]) -> Any:
    """A capacity run's noise: the machine before and during the probes, the stacks'
    and engine's wait, the repeats of one load (its confirmations) as the A/A."""
    from stackrace.race.core.noise import summarize
    from stackrace.rules.confidence import noise_sigma

    probes = [p for st in result.stacks if st.capacity for p in st.capacity.probes]
    groups: dict[tuple[str, float], list[float]] = {}
    for st in result.stacks:
        for p in st.capacity.probes if st.capacity else []:
            if p.meets:
                groups.setdefault((st.name, p.load), []).append(p.level.rps)
    repeated = [g for g in groups.values() if len(g) >= 2]
    return summarize(
        result.machine.cores,
        [p.noise for p in probes if p.noise is not None],
        [p.level.cpu_wait_percent for p in probes],
        before=before[0] if before else None,
        aa_sigma=noise_sigma(repeated),
        aa_repeats=sum(len(g) for g in repeated),
        other_runs=shared,
    )


def _failures(result: BenchRun) -> list[str]:
    """What makes the run fail without any rule: a stack not measured, a level where
    nothing succeeded, a database that failed during the run. One line each."""
    out = [f"{st.name}: not measured ({st.error})" for st in result.stacks if st.error]
    out += run_failures(result)  # every request of a level, or one of yours, failed
    db_levels = [
        gate.level_name(st.name, lv) for st in result.stacks for lv in st.levels if lv.db_down
    ]
    if db_levels:
        out.append(
            "the database failed during the run (down, restarted or its tables gone): "
            f"{', '.join(db_levels)} measured the database, not the stack, and were not judged"
        )
    return out


def _tell(
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


def _close(cluster: ClusterRun | None, metrics: MetricsExporter | None) -> None:
    """What a run that ends before measuring opened: the cluster's connection, --metrics."""
    if cluster is not None:
        cluster.close()
    if metrics is not None:
        metrics.close()


async def _run_interruptible(
    plan: BenchPlan,
    recorder: BenchRecorder,
    parts: RaceParts | None = None,
    cluster: ClusterRun | None = None,
    progress: Callable[[str], None] = _progress,
    before: list[float] | None = None,
) -> str | None:
    """Run the bench; Ctrl-C, SIGTERM or SIGHUP cancel it cleanly (stacks stopped,
    results kept): the signal's name, or None when it ran to its end."""

    async def work() -> None:
        if cluster is not None and WORKLOADS[plan.settings.workload].needs_db:
            plan.db_env = await cluster.database_env()  # on the db node
        if plan.noise is not None and before is not None:
            before.append(await plan.noise.quiet_cores(1.0))  # the machine as it was
        await run_bench(plan, progress, recorder, parts)

    # without the app host nothing is left to measure
    hooks = [cluster.on_app_lost.append] if cluster is not None else []
    _, why = await runguard.interruptible(work(), "stackrace bench", hooks)
    return why


async def _remeasure(
    plan: BenchPlan,
    result: BenchRun,
    uncertain: list[tuple[str, int]],
    parts: RaceParts | None = None,
    progress: Callable[[str], None] = _progress,
) -> BenchRun:
    """Measure the levels whose verdict fell within the noise again, three times, and keep
    every sample: the verdict then rests on the median of all of them."""
    from dataclasses import replace

    by_name = {s.name: s for s in plan.stacks}
    for name, level in uncertain:
        progress(f"{name} @ {level}: within the measured spread of the baseline; measuring again")
        settings = msgspec.structs.replace(plan.settings, concurrency_levels=[level], repeat=3)
        again = await run_bench(
            replace(plan, stacks=[by_name[name]], settings=settings), progress, parts=parts
        )
        if not again.stacks or not again.stacks[0].levels:
            continue
        fresh = again.stacks[0].levels[0]
        for st in result.stacks:
            if st.name != name:
                continue
            for i, lv in enumerate(st.levels):
                if lv.concurrency == level:
                    fresh.samples = lv.samples + fresh.samples
                    st.levels[i] = fresh
    return result
