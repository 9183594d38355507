"""`stackrace bench`: a headless comparison that ends with a table, files and a verdict.

Its options are the race settings (race/settings.py declares each once, with its
default and parser); a `--preset` supplies them, or `--from RUN.json` (a saved run: its
settings, and its stacks as the run recorded them: report/provenance.py), and options
given override them. Ctrl-C or SIGTERM stops the run between requests: every level
already measured is printed and written, and the run says it was interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from stackrace.cluster.flags import add_cluster_arguments, connect_from_args, wants_cluster
from stackrace.commands._common import load, resolve_all, serves_workload, split_stacks
from stackrace.config import ConfigError, StackFile
from stackrace.metrics.exporter import MetricsError, MetricsExporter
from stackrace.metrics.exporter import open_from_args as open_metrics
from stackrace.metrics.flags import add_metrics_arguments
from stackrace.presets import load_preset
from stackrace.race.bench import BenchPlan, BenchRecorder, plan_placement, run_bench
from stackrace.race.core import RaceParts
from stackrace.race_settings import RaceSettings, add_options, given
from stackrace.report import gate
from stackrace.report.junit import junit_xml
from stackrace.report.provenance import changed_since, provenance, recorded_stacks
from stackrace.report.schema import BenchRun
from stackrace.report.write import check_output_paths, print_run, read_run, write_outputs
from stackrace.workloads import WORKLOADS

if TYPE_CHECKING:
    from stackrace.cluster.run import ClusterRun


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--preset",
        help="a stored scenario from presets/ (its settings are "
        "the defaults; options given here override them)",
    )
    p.add_argument(
        "--from",
        dest="from_run",
        metavar="RUN.json",
        help="run a saved run again: its settings, and its stacks as the run recorded "
        "them (options given here override the settings)",
    )
    add_options(p)
    p.add_argument("--json", dest="json_out", help="write the run (versioned schema) here")
    p.add_argument("--csv", dest="csv_out", help="write a CSV table here")
    p.add_argument("--markdown", dest="md_out", help="write a Markdown table here")
    p.add_argument("--chart", dest="chart_out", help="write an SVG chart here")
    p.add_argument(
        "--junit",
        dest="junit_out",
        help="write JUnit XML here: a test case per stack and level, the gate's "
        "crossed rules as failures",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    add_metrics_arguments(p)
    p.add_argument("--baseline", help="a saved run to compare against (with --fail-on)")
    p.add_argument(
        "--fail-on",
        default="qps<-10%,p99>+25%,failures>0.1%",
        help="regression rules (default: %(default)s)",
    )
    add_cluster_arguments(p)
    p.set_defaults(func=run)


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
    changes = given(args)
    if "stacks" in changes:
        changes["stacks"] = [s for ref in changes["stacks"] for s in split_stacks(ref)]
    return msgspec.structs.replace(base, **changes)


def build_plan(
    args: argparse.Namespace, rerun: BenchRun | None = None
) -> tuple[BenchPlan, StackFile] | None:
    settings = build_settings(args, rerun)
    if settings is None:
        return None
    if not settings.stacks:
        _fail("name the stacks (--stacks A,B) or a --preset")
        return None
    stacks = _stacks(args, rerun)
    if stacks is None:
        return None
    chosen = resolve_all([",".join(settings.stacks)], stacks)
    if chosen is None:
        return None
    if not serves_workload(chosen, settings.workload, "stackrace bench"):
        return None
    preset = rerun.settings.preset if rerun is not None else args.preset
    plan = BenchPlan(stacks=chosen, settings=settings, preset=preset, stacks_file=args.stacks_file)
    return plan, stacks


def _stacks(args: argparse.Namespace, rerun: BenchRun | None) -> StackFile | None:
    """The stacks file, or with --from the stack blocks the run recorded (a file given
    with --stacks-file wins, with a note when it is not the file the run read)."""
    if rerun is None:
        return load(args)
    if args.stacks_file is None:
        try:
            recorded = recorded_stacks(rerun, args.from_run)
        except ConfigError as exc:
            _fail(str(exc))
            return None
        if recorded is not None:
            note = changed_since(rerun)
            if note:
                print(f"stackrace bench: note: {note}", file=sys.stderr)
            return recorded
    stacks = load(args)
    if stacks is not None:
        was = rerun.provenance.stacks_sha256 if rerun.provenance is not None else ""
        if was != stacks.sha256:
            print(
                f"stackrace bench: note: {args.from_run} "
                + (
                    f"was run with another stacks file (sha256 {was[:12]}…); "
                    if was
                    else "records no stack definitions; "
                )
                + f"its stacks are taken from {stacks.source} as it is now",
                file=sys.stderr,
            )
    return stacks


def _progress(line: str) -> None:
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


def run(args: argparse.Namespace) -> int:
    outputs = {"--json": args.json_out, "--csv": args.csv_out, "--markdown": args.md_out}
    problem = check_output_paths({**outputs, "--chart": args.chart_out, "--junit": args.junit_out})
    if problem:  # before any load: a run is never thrown away for a bad path
        print(f"stackrace bench: {problem}", file=sys.stderr)
        return 2
    rerun: BenchRun | None = None
    if args.from_run:
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
    preset = load_preset(args.preset) if args.preset else None
    baseline: BenchRun | None = None
    rules = []
    if args.baseline:
        try:
            baseline = read_run(args.baseline)
            rules = gate.parse_rules(args.fail_on)
        except ValueError as exc:
            _fail(str(exc))
            return 2
    try:
        metrics = open_metrics(args, "stackrace bench")
    except MetricsError as exc:
        _fail(str(exc))
        return 2
    if metrics is not None:
        plan.on_core = metrics.follow_core
    progress: Callable[[str], None] = _quiet if args.no_progress else _progress
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
        except ClusterError as exc:
            cluster.close()
            if metrics is not None:
                metrics.close()
            _fail(str(exc))
            return 2
    db = None
    try:
        if WORKLOADS[plan.settings.workload].needs_db and cluster is None:
            from stackrace.commands.db_hook import open_for_workload

            opened = open_for_workload()
            if opened is None:
                return 2
            db, plan.db_env = opened
            from stackrace.db.watch import DbWatch

            plan.database = DbWatch(db.settings)
        placement, why = plan_placement(plan.settings, len(plan.stacks), parts)
        recorder = BenchRecorder(plan, placement, why)
        interrupted = asyncio.run(
            _served(metrics, _run_interruptible(plan, recorder, parts, cluster, progress))
        )
        result = recorder.finish(interrupted)
        # where the run came from: what `bench --from` needs to run it again
        origin = provenance(plan.stacks, stacks_file, rerun_of=args.from_run)
        result = msgspec.structs.replace(result, provenance=origin)
        if preset is not None:  # a replayed experiment: its figures and claims go with the run
            result = msgspec.structs.replace(result, then=preset.then())
        elif rerun is not None and rerun.then is not None:
            result = msgspec.structs.replace(result, then=rerun.then)
        verdict = None
        if baseline is not None and interrupted is None:
            verdict = gate.judge(result, baseline, rules)
            if verdict.uncertain:
                result = asyncio.run(
                    _served(metrics, _remeasure(plan, result, verdict.uncertain, parts, progress))
                )
                verdict = gate.judge(result, baseline, rules)
    finally:
        if db is not None:
            db.close()
        if cluster is not None:
            cluster.close()
        if metrics is not None:
            metrics.close()
    print_run(result)
    write_outputs(result, args.json_out, args.csv_out, args.md_out, args.chart_out)
    if args.junit_out:
        Path(args.junit_out).write_text(junit_xml(result, verdict, args.baseline))
    if interrupted and cluster is not None and cluster.app_lost:
        print(
            f"stackrace bench: {cluster.app_lost}: the run ended; the levels above were "
            "measured, the rest were not",
            file=sys.stderr,
        )
        return 1
    if interrupted:
        print(
            f"run interrupted ({interrupted}): the levels above were measured, the rest were not",
            file=sys.stderr,
        )
        return 130
    for note in result.notes:
        print(f"! {note}", file=sys.stderr)
    lost_db = any(lv.db_down for st in result.stacks for lv in st.levels) or any(
        "database" in (st.error or "") for st in result.stacks
    )
    if lost_db:
        print("stackrace bench: the database went down during the run", file=sys.stderr)
    failed = any(st.error for st in result.stacks) or lost_db
    if verdict is not None:
        print("\n".join(gate.verdict_lines(verdict, args.baseline)))
        return 1 if not verdict.ok else 0
    return 1 if failed else 0


async def _run_interruptible(
    plan: BenchPlan,
    recorder: BenchRecorder,
    parts: RaceParts | None = None,
    cluster: ClusterRun | None = None,
    progress: Callable[[str], None] = _progress,
) -> str | None:
    """Run the bench; Ctrl-C or SIGTERM cancel it cleanly (stacks stopped, results kept)."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    why: list[str] = []

    def stop(name: str) -> None:
        why.append(name)
        task.cancel()

    for sig, name in ((signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM")):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop, name)
    if cluster is not None:  # without the app host nothing is left to measure
        cluster.on_app_lost.append(stop)
    try:
        if cluster is not None and WORKLOADS[plan.settings.workload].needs_db:
            plan.db_env = await cluster.database_env()  # on the db node
        await run_bench(plan, progress, recorder, parts)
    except asyncio.CancelledError:
        if not why:
            raise
        task.uncancel()
        return why[0]
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
    return None


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
        settings = msgspec.structs.replace(plan.settings, concurrency=[level], repeat=3)
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
