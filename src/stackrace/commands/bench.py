"""`stackrace bench`: a headless comparison that ends with a table, files and a verdict.

Its options are the race settings (race/settings.py declares each once, with its
default and parser); a `--preset` supplies them, and options given override it.
Ctrl-C or SIGTERM stops the run between requests: every level already measured is
printed and written, and the run says it was interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from typing import TYPE_CHECKING

import msgspec

from stackrace.cluster.flags import add_cluster_arguments, connect_from_args, wants_cluster
from stackrace.commands._common import load, resolve_all, serves_workload, split_stacks
from stackrace.config import ConfigError
from stackrace.presets import load_preset
from stackrace.race.bench import BenchPlan, BenchRecorder, plan_placement, run_bench
from stackrace.race.core import RaceParts
from stackrace.race_settings import RaceSettings, add_options, given
from stackrace.report import gate
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
    add_options(p)
    p.add_argument("--json", dest="json_out", help="write the run (versioned schema) here")
    p.add_argument("--csv", dest="csv_out", help="write a CSV table here")
    p.add_argument("--markdown", dest="md_out", help="write a Markdown table here")
    p.add_argument("--chart", dest="chart_out", help="write an SVG chart here")
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


def build_settings(args: argparse.Namespace) -> RaceSettings | None:
    base = RaceSettings()
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


def build_plan(args: argparse.Namespace) -> BenchPlan | None:
    settings = build_settings(args)
    if settings is None:
        return None
    if not settings.stacks:
        _fail("name the stacks (--stacks A,B) or a --preset")
        return None
    stacks = load(args)
    if stacks is None:
        return None
    chosen = resolve_all([",".join(settings.stacks)], stacks, args.stacks_file or "stacks.toml")
    if chosen is None:
        return None
    if not serves_workload(chosen, settings.workload, "stackrace bench"):
        return None
    return BenchPlan(
        stacks=chosen, settings=settings, preset=args.preset, stacks_file=args.stacks_file
    )


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    outputs = {"--json": args.json_out, "--csv": args.csv_out, "--markdown": args.md_out}
    problem = check_output_paths({**outputs, "--chart": args.chart_out})
    if problem:  # before any load: a run is never thrown away for a bad path
        print(f"stackrace bench: {problem}", file=sys.stderr)
        return 2
    plan = build_plan(args)
    preset = load_preset(args.preset) if plan is not None and args.preset else None
    if plan is None:
        return 2
    baseline: BenchRun | None = None
    rules = []
    if args.baseline:
        try:
            baseline = read_run(args.baseline)
            rules = gate.parse_rules(args.fail_on)
        except ValueError as exc:
            _fail(str(exc))
            return 2
    cluster = None
    parts: RaceParts | None = None
    if wants_cluster(args):  # the stacks on the app node, the engines on the load nodes
        from stackrace.cluster.errors import ClusterError
        from stackrace.cluster.frontends import bench_parts

        cluster = connect_from_args(args, "stackrace bench")
        if cluster is None:
            return 2
        try:
            parts = bench_parts(cluster)
        except ClusterError as exc:
            cluster.close()
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
        interrupted = asyncio.run(_run_interruptible(plan, recorder, parts, cluster))
        result = recorder.finish(interrupted)
        if preset is not None:  # a replayed experiment: its figures and claims go with the run
            result = msgspec.structs.replace(result, then=preset.then())
        verdict = None
        if baseline is not None and interrupted is None:
            verdict = gate.judge(result, baseline, rules)
            if verdict.uncertain:
                result = asyncio.run(_remeasure(plan, result, verdict.uncertain, parts))
                verdict = gate.judge(result, baseline, rules)
    finally:
        if db is not None:
            db.close()
        if cluster is not None:
            cluster.close()
    print_run(result)
    write_outputs(result, args.json_out, args.csv_out, args.md_out, args.chart_out)
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
    try:
        if cluster is not None and WORKLOADS[plan.settings.workload].needs_db:
            plan.db_env = await cluster.database_env()  # on the db node
        await run_bench(plan, _progress, recorder, parts)
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
) -> BenchRun:
    """Measure the levels whose verdict fell within the noise again, three times, and keep
    every sample: the verdict then rests on the median of all of them."""
    from dataclasses import replace

    by_name = {s.name: s for s in plan.stacks}
    for name, level in uncertain:
        _progress(f"{name} @ {level}: within the measured spread of the baseline; measuring again")
        settings = msgspec.structs.replace(plan.settings, concurrency=[level], repeat=3)
        again = await run_bench(
            replace(plan, stacks=[by_name[name]], settings=settings), _progress, parts=parts
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
