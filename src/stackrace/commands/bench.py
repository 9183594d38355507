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
import dataclasses
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from stackrace.base.paths import writable_dir
from stackrace.commands import runguard
from stackrace.commands._common import (
    announce,
)
from stackrace.commands.bench_args import BenchOptions, add_bench_arguments, bench_options
from stackrace.commands.bench_output import tell
from stackrace.commands.bench_plan import build_plan, capacity_plan, cluster_parts, fail
from stackrace.commands.db_hook import open_for_workload
from stackrace.db.watch import DbWatch
from stackrace.metrics.exporter import MetricsExporter, open_exporter
from stackrace.race.bench.driver import plan_placement, run_bench
from stackrace.race.bench.protocol import BenchPlan
from stackrace.race.bench.results import BenchResults, new_run
from stackrace.race.core.capacity_plan import ResumeError
from stackrace.race.core.journal import (
    CapacitySpec,
    Journal,
    JournalStart,
    Resumed,
    read_journal,
)
from stackrace.race.core.members import RaceParts
from stackrace.race.core.noise import NoiseMeter, capacity_noise
from stackrace.race.core.presets import load_preset
from stackrace.race.core.urls import unsampled_slo
from stackrace.report import gate
from stackrace.report.failures import bench_failures
from stackrace.report.junit import junit_xml
from stackrace.report.provenance import provenance
from stackrace.report.schema import BenchRun, StackResult
from stackrace.report.slo import Slo
from stackrace.report.why import write_flames
from stackrace.report.write import (
    EXIT_NOT_WRITTEN,
    check_output_paths,
    read_run,
    run_outputs,
    write_files,
)
from stackrace.settings.workloads import WORKLOADS
from stackrace.stacks.catalogue import StackFile
from stackrace.stacks.run_roots import RUNS_MADE_FOR, runs_dir

if TYPE_CHECKING:
    from stackrace.cluster.run import ClusterRun


def register(p: argparse.ArgumentParser) -> None:
    add_bench_arguments(p)
    p.set_defaults(func=run, read_options=bench_options)


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


def _resume(o: BenchOptions) -> tuple[JournalStart, Resumed] | None:
    """`--resume J`: the journal read and checked; None after one line. Options that
    change what is measured are refused: the rest is measured as the start was."""
    if o.race.from_run or o.race.preset:
        fail("--resume continues a journal with its own settings: --from and --preset do not apply")
        return None
    changed = sorted(o.race.given) + [
        f
        for f, v in (
            ("--capacity", o.capacity),
            ("--budget", o.budget),
            ("--precision", o.precision),
        )
        if v
    ]
    if changed:
        fail(
            f"--resume continues a journal with the settings it started with: "
            f"{', '.join(changed)} would change them (start a new run instead)"
        )
        return None
    resume = o.guard.resume
    assert resume is not None  # called for --resume
    start, entries = read_journal(resume)
    if start.command != "bench":
        fail(
            f"{resume}: the journal of `stackrace {start.command}`: continue it with "
            f"`stackrace {start.command} --resume {resume}`"
        )
        return None
    return start, Resumed(entries)


def run(o: BenchOptions) -> int:
    resumed: Resumed | None = None
    start: JournalStart | None = None
    if o.guard.resume:
        got = _resume(o)
        if got is None:
            return 2
        start, resumed = got
        if start.capacity is not None:  # the search the journal started
            c = start.capacity
            o = dataclasses.replace(o, capacity=True, budget=c.budget_s, precision=c.precision)
        # every file the first run wrote, written again whole; its stacks are checked as
        # a run file's are
        journal = str(o.guard.resume)
        files = runguard.resume_outputs("stackrace bench", journal, start.outputs, o.files)
        race = dataclasses.replace(o.race, from_run=journal)
        o = dataclasses.replace(o, files=files, race=race)
    f = o.files
    outputs = {"--json": f.json_out, "--csv": f.csv_out, "--markdown": f.md_out}
    pages = {"--html": f.html_out, "--series-csv": f.series_csv_out}
    problem = check_output_paths(
        {**outputs, "--chart": f.chart_out, "--junit": f.junit_out, **pages}
    )
    if not problem and f.flame_dir and not os.path.isdir(f.flame_dir):
        problem = f"--flame {f.flame_dir}: not a directory"
    if problem:  # before any load: a run is never thrown away for a bad path
        print(f"stackrace bench: {problem}", file=sys.stderr)
        return 2
    # before any load: a rule that cannot be judged is refused (TermError), never ignored
    rules = gate.check_rules(o.fail_on, o.baseline)
    rerun: BenchRun | None = None
    if start is not None:
        rerun = start.run
    elif o.race.from_run:
        if o.race.preset:
            fail("--from and --preset both give the settings: give one of them")
            return 2
        rerun = read_run(o.race.from_run)
    built = build_plan(o.race, rerun)
    if built is None:
        return 2
    plan, stacks_file = built
    problem = unsampled_slo(plan.settings.slo, plan.urls)
    if problem:  # a server not sampled has no memory or CPU figure to meet them with
        fail(problem)
        return 2
    if o.capacity:
        plan.capacity = capacity_plan(o.budget, o.precision, plan.settings)
        if plan.capacity is None:
            return 2
    preset = load_preset(o.race.preset) if o.race.preset else None
    baseline: BenchRun | None = None
    if o.baseline:
        baseline = read_run(o.baseline)
    notes: list[str] = []
    lock = runguard.claim_cores(
        "stackrace bench", o.guard.share_cores, notes, cluster=o.race.cluster.wanted
    )
    if lock is None:
        return runguard.EXIT_SHARED
    try:
        return _run_locked(
            o, plan, stacks_file, rerun, preset, baseline, rules, notes, resumed, lock
        )
    finally:
        lock.release()


def skeleton(plan: BenchPlan, origin: Any) -> BenchRun:
    """The run as a journal's start holds it: settings, stack names, provenance."""
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
    o: BenchOptions,
    plan: BenchPlan,
    stacks_file: StackFile,
    rerun: BenchRun | None,
    preset: Any,
    baseline: BenchRun | None,
    rules: Any,
    shared: list[str],
    resumed: Resumed | None,
    lock: runguard.runlocks.RunLock,
) -> int:
    metrics = open_exporter(o.metrics, "stackrace bench")
    if metrics is not None:
        plan.on_core = metrics.follow_core
    # the cluster first: a refusal (no Ray, a node missing) is one line, before any
    # announcement or journal
    cluster = None
    parts: RaceParts | None = None
    if o.race.cluster.wanted:  # the stacks on the app node, the engines on the load nodes
        joined = cluster_parts(o.race.cluster, "stackrace bench", plan.settings.cpus)
        if joined is None:
            if metrics is not None:
                metrics.close()
            return 2
        cluster, parts = joined
    if plan.stacks:  # before anything of the stacks files runs (--url alone runs none)
        if not o.race.cluster.wanted:  # (a cluster's stacks run on its app node)
            # a read-only or full home: one line now, not after the first progress lines
            writable_dir(runs_dir(), "its run directories", "STACKRACE_RUNS_DIR", RUNS_MADE_FOR)
        announce(stacks_file, "stackrace bench", quiet=o.no_progress)
    progress: Callable[[str], None] = _quiet if o.no_progress else _progress
    # where the run came from: what `bench --from` needs to run it again
    origin = provenance(plan.stacks, stacks_file, rerun_of=o.race.from_run)
    f = o.files
    if resumed is not None:
        plan.resume = resumed
        try:
            plan.journal = Journal.reopen(Path(str(o.guard.resume)))
        except OSError as exc:
            fail(f"{o.guard.resume}: cannot append to it: {exc.strerror or exc}")
            _close(cluster, metrics)
            return 2
        progress(
            f"resuming {o.guard.resume}: {resumed.work} levels and probes measured before, "
            f"{len(resumed.done)} stacks done"
        )
    else:
        try:
            where = runguard.journal_path(
                o.guard.journal, [f.json_out, f.csv_out, f.md_out, f.html_out], "bench"
            )
        except OSError as exc:
            fail(str(exc))
            _close(cluster, metrics)
            return 2
        start = JournalStart(
            command="bench",
            run=skeleton(plan, origin),
            capacity=CapacitySpec(plan.capacity.budget_s, plan.capacity.precision)
            if plan.capacity is not None
            else None,
            outputs=runguard.record_outputs(where, f),
        )
        plan.journal = runguard.open_journal("stackrace bench", where, start)
        if plan.journal is not None:
            progress(f"journal: {where} (every finished level and probe; --resume continues it)")
    if plan.capacity is not None:
        plan.noise = NoiseMeter()
    db = None
    before: list[float] = []
    try:
        if WORKLOADS[plan.settings.workload].needs_db and cluster is None:
            opened = open_for_workload()
            if opened is None:
                runguard.finish_journal(plan.journal, None, keep=False)  # it holds nothing
                return 2
            db, plan.db_env = opened

            plan.database = DbWatch(db.settings)
        placement, why = plan_placement(plan.settings, plan.members, parts)
        results = BenchResults(plan, placement, why)
        results.run.notes.extend(runguard.shared_notes(shared))
        try:
            interrupted = asyncio.run(
                _served(
                    metrics, _run_interruptible(plan, results, parts, cluster, progress, before)
                )
            )
        except ResumeError as exc:
            fail(f"{o.guard.resume}: {exc}")
            return 2
        result = results.finish(interrupted)
        # a run that started on these cores after this one: in this run's record too
        result.notes.extend(runguard.shared_notes(runguard.late_sharers(lock, shared)))
        result = msgspec.structs.replace(result, provenance=origin)
        if plan.noise is not None:
            result.noise = capacity_noise(result, before, shared)
        if preset is not None:  # a replayed experiment: its figures and claims go with the run
            result = msgspec.structs.replace(result, then=preset.then())
        elif rerun is not None and rerun.then is not None:
            result = msgspec.structs.replace(result, then=rerun.then)
        verdict = None
        if rules and interrupted is None:
            verdict = gate.gate_verdict(result, baseline, rules)
            if verdict.uncertain:
                result = asyncio.run(
                    _served(metrics, _remeasure(plan, result, verdict.uncertain, parts, progress))
                )
                verdict = gate.gate_verdict(result, baseline, rules)
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
    problems = write_files(
        run_outputs(
            result, f.json_out, f.csv_out, f.md_out, f.chart_out, f.html_out, f.series_csv_out,
            baseline,
        )
    )  # fmt: skip
    if f.flame_dir:  # a flame graph per evidence window (report/why.py)
        problems += write_flames(result, f.flame_dir)[1]
    problems += write_files(
        [("--junit", f.junit_out, lambda: junit_xml(result, verdict, o.baseline))]
    )
    kept = runguard.finish_journal(plan.journal, interrupted, keep=bool(problems))
    failed = bench_failures(result)
    # a lost app host ended the run: not the user's interruption (exit 1, named)
    app_lost = cluster.app_lost if interrupted and cluster is not None else None
    try:
        tell(result, verdict, o.baseline, interrupted, failed, problems, app_lost)
        if kept and interrupted:
            line = runguard.kept_line("stackrace bench", plan.journal, kept, "level and probe")
            print(line, file=sys.stderr)
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


def _close(cluster: ClusterRun | None, metrics: MetricsExporter | None) -> None:
    """What a run that ends before measuring opened: the cluster's connection, --metrics."""
    if cluster is not None:
        cluster.close()
    if metrics is not None:
        metrics.close()


async def _run_interruptible(
    plan: BenchPlan,
    results: BenchResults,
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
        await run_bench(plan, progress, results, parts)

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
