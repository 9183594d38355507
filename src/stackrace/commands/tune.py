"""`stackrace tune STACK… --slo 'p99<50ms'`: the best configuration of one or more servers
for this machine, found by measuring, with how sure that is, and the command line that
runs it.

    stackrace tune gunicorn-gthread --slo 'p99<50ms' --workload io
    stackrace tune gunicorn-gthread uvicorn --slo 'p99<50ms'        # servers ranked together
    stackrace tune --app shop.wsgi:app --slo 'p99<100ms'            # your app, every server
    stackrace tune --url http://127.0.0.1:8000/ --slo 'p99<50ms'    # the search alone
    stackrace tune --resume tune.json.journal                       # after Ctrl-C or a kill
    stackrace tune --from tune.json                                 # the saved answer again

The space: each server's tunables (stacks.tunables) over values bounded by the machine
— workers 1 … 2 × cores + 1, threads 1 … 32 on a log scale, at most the ceilings from
cores and memory (config.tunable_ceilings), every choice a param lists. The search is
race/bench/tune_search.py (a coarse log-spaced pass over the whole space, refinement around
the leader until its neighbours on every axis are measured, then interleaved rounds of
the leaders in a shuffled order until the ranking is decided with 95 % confidence or
the budget ends); race/bench/tune_run.py carries it out on the race core, one configuration
loaded at a time on the servers' cores, the engine on its own; race/bench/tune_result.py
makes the run file. The budget (`--budget`, default 5 minutes) is kept by the clock
and counts the time a resumed tune spent before.

What it prints and writes (report/tune.py; `--json`, `--markdown`, `--chart`): every
point tried with its capacity and 90 % interval, the verdict — a winner only with the
confidence it beats the runner-up with, else "a tie within noise" or "not decided" —,
the deploy line (the app it serves, yours or plainly stackrace's test app, the server's
version it needs, only the flags that differ from the server's defaults:
stacks/production.py), where the configurations ran and what that means for a deploy,
whether the best lies on an edge of the range, the points not measured, and the noise
of the machine meanwhile (race/core/noise.py).

Every probe is journalled as it ends (race/core/journal.py: beside `--json`, or --journal):
Ctrl-C, SIGTERM or SIGHUP end the tune with exit 130, its files written and marked
interrupted, no winner named; a `kill -9` leaves the journal, and `tune --resume J`
goes on exactly where it stopped. A tune that would share the cores with another
stackrace run refuses (exit 75) unless `--share-cores` (commands/runguard.py).

Exit status: 0 when a winner is named or the leaders are tied within noise; 1 when no
configuration meets the SLO or the budget ended before the answer was decided; 2 for a
usage error; 74 when a file could not be written; 75 when the cores are another run's;
130 when interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import secrets
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from stackrace.commands import runguard
from stackrace.commands._common import announce, load
from stackrace.commands.bench import skeleton
from stackrace.commands.bench_args import add_search_arguments
from stackrace.commands.bench_plan import build_plan, cluster_parts
from stackrace.commands.cluster_args import add_cluster_arguments
from stackrace.commands.db_hook import open_for_workload
from stackrace.commands.output_args import (
    add_allow_remote_argument,
    add_json_file_argument,
    add_no_progress_argument,
    add_table_arguments,
)
from stackrace.commands.parser import describe, examples
from stackrace.commands.settings_args import add_options
from stackrace.commands.target_args import add_url_arguments, add_your_app_arguments
from stackrace.commands.tune_args import TuneOptions, probe_settings, tune_options
from stackrace.commands.tune_output import show, write
from stackrace.commands.tune_space import servers_to_tune, space_of
from stackrace.db.watch import DbWatch
from stackrace.engine.model import MAX_RATE_PER_PROCESS
from stackrace.race.bench.protocol import BenchPlan
from stackrace.race.bench.tune_result import tune_result
from stackrace.race.bench.tune_run import TuneJob, TuneState, noise_meter, run_tune
from stackrace.race.bench.tune_search import Space, TunePlan, TuneSearch
from stackrace.race.core.capacity_plan import CapacityPlan, ResumeError
from stackrace.race.core.journal import Entry, Journal, JournalStart, TuneSpec, read_journal
from stackrace.report import tune as tunereport
from stackrace.report.provenance import provenance
from stackrace.report.schema import BenchRun
from stackrace.report.write import check_output_paths, read_run
from stackrace.settings.parsers import COMMAND_LINE
from stackrace.settings.race_settings import REQUEST_FIELDS
from stackrace.settings.workloads import WORKLOADS
from stackrace.stacks.catalogue import StackFile
from stackrace.stacks.variants import resolve

PROG = "stackrace tune"
# the coarse pass of a 4 × 6 space is ~3 minutes on a busy 2-core box (a threads=1
# configuration needs 12 s a probe for a p99's 1,000 answers), then the leader's
# neighbours and the rounds: 5 minutes give the answer its rounds
DEFAULT_BUDGET_S = 300.0
DEFAULT_PRECISION = 0.10  # a configuration's search bisects to 10 %: the rounds decide


TUNE_HELP = {
    "slo": "the objective to tune for, targets to stay below, e.g. 'p99<50ms' (a percentile "
    "p0-p100, mean, max, failures, waiting, rss, cpu): a configuration's capacity is the "
    "most load that meets it",
    "concurrency_levels": "connections each capacity search starts from (its first value) "
    "(default 10)",
    "duration": "the longest a probe lasts; it ends as soon as it has its answers (default 2s)",
    "warmup": "load before each probe's figures count (default 0s)",
    "rate": "search rates (req/s) instead of connections, starting from this one (at most "
    f"{MAX_RATE_PER_PROCESS:,}: a stack's engine process schedules no more) (default: "
    "connections)",
}
EXAMPLES = examples(
    (
        "stackrace tune gunicorn-gthread --slo 'p99<50ms' --json tune.json",
        "the best workers and threads of one server, saved",
    ),
    (
        "stackrace tune gunicorn-gthread uvicorn --slo 'p99<50ms' --budget 5m",
        "two servers, ranked together",
    ),
    (
        "stackrace tune --url http://127.0.0.1:8000/ --slo 'p99<50ms' --budget 1m",
        "the capacity of a server you started",
    ),
    ("stackrace tune --from tune.json", "a saved tune, rendered again"),
)


def register(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "Find the best configuration of one or more servers for this machine under an SLO, "
        "by measuring: every configuration tried, how sure the answer is, and the command "
        "line that runs the winner.",
        EXAMPLES,
        "docs/tune.md",
    )
    p.add_argument(
        "stack", nargs="*", help="the stacks to tune (names from stacks.toml), ranked together"
    )
    what = p.add_argument_group("what to tune")
    what.add_argument("--from", dest="from_run", metavar="TUNE.json", help="render a saved tune")
    add_options(what, only=("workload", "io_ms", "queries"))
    search = p.add_argument_group("the objective and the search")
    add_options(search, only=("slo",), helps=TUNE_HELP)
    add_search_arguments(
        search, per="in all", budget=f"{DEFAULT_BUDGET_S / 60:g}m", precision="10%%"
    )
    search.add_argument(
        "--workers", dest="tune_workers", metavar="LIST",
        help="workers to try, e.g. 1,2,3,5 (default: 1 to 2 × cores + 1)",
    )  # fmt: skip
    search.add_argument(
        "--threads", dest="tune_threads", metavar="LIST",
        help="threads to try, e.g. 1,4,16 (default: 1 to 32, log-spaced)",
    )  # fmt: skip
    probe = p.add_argument_group("each probe")
    add_options(
        probe,
        skip=("stacks", "isolation", "repeat", "requests", "workload", "io_ms", "queries", "slo",
              *REQUEST_FIELDS),
        helps=TUNE_HELP,
    )  # fmt: skip
    add_options(p.add_argument_group("your requests (instead of the workload's)"),
                only=REQUEST_FIELDS)  # fmt: skip
    servers = p.add_argument_group("a server you started: the capacity search alone")
    add_url_arguments(servers)
    add_allow_remote_argument(servers, argparse.SUPPRESS)
    add_your_app_arguments(p.add_argument_group("your app on every server (docs/your-app.md)"))
    out = p.add_argument_group("what it writes")
    add_json_file_argument(out, "write every configuration and probe here")
    add_table_arguments(out, csv=False, markdown="write the answer and its table here")
    add_no_progress_argument(out)
    runguard.add_run_arguments(p.add_argument_group("journal, resume, other runs (docs/tune.md)"))
    add_cluster_arguments(p)
    p.set_defaults(func=run, read_options=tune_options)


def _fail(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return 2


def _progress(line: str) -> None:
    with contextlib.suppress(OSError):  # the terminal may be gone: the files hold it
        print(line, file=sys.stderr, flush=True)


def _resumed(o: TuneOptions) -> tuple[JournalStart, list[Entry]] | None:
    if (
        o.named
        or o.race.from_run
        or o.race.given
        or o.budget
        or o.precision
        or o.workers
        or o.threads
    ):
        _fail(
            "--resume continues a tune with the journal's stacks, settings and space: "
            "give no stack and no option that would change them"
        )
        return None
    resume = str(o.guard.resume)
    start, entries = read_journal(resume)
    if start.command != "tune" or start.tune is None:
        _fail(
            f"{resume}: the journal of `stackrace {start.command}`: continue it with "
            f"`stackrace {start.command} --resume {resume}`"
        )
        return None
    return start, entries


def run(o: TuneOptions) -> int:
    resumed = None
    if o.guard.resume:
        resumed = _resumed(o)
        if resumed is None:
            return 2
        # every file the first run wrote, written again whole
        files = runguard.resume_outputs(PROG, o.guard.resume, resumed[0].outputs, o.files)
        o = dataclasses.replace(o, files=files)
    f = o.files
    problem = check_output_paths(
        {"--json": f.json_out, "--markdown": f.md_out, "--chart": f.chart_out}
    )
    if problem:
        return _fail(problem)
    if o.race.from_run:
        result = read_run(o.race.from_run)
        if result.tune is None and not any(st.capacity for st in result.stacks):
            return _fail(f"{o.race.from_run}: not a tune or capacity run (no capacity in it)")
        return show(result)
    rerun: BenchRun | None = None
    spec: TuneSpec | None = None
    urls, app = o.race.target.urls, o.race.target.your_app.app
    if resumed is not None:
        start, _ = resumed
        rerun, spec = start.run, start.tune
        # its stacks are checked as a run file's are
        o = dataclasses.replace(o, race=dataclasses.replace(o.race, from_run=o.guard.resume))
    elif not o.race.given.get("slo"):
        return _fail("give the objective to tune for: --slo 'p99<50ms'")
    elif o.named and urls:
        return _fail("name stacks to tune, or a server you started (--url URL): not both")
    elif not (o.named or urls or app):
        return _fail("name a stack to tune, or a server you started (--url URL)")
    elif urls and (o.workers or o.threads):
        return _fail(
            "--workers and --threads sweep a stack's settings: a server you started (--url) "
            "is measured as it runs (the capacity search alone)"
        )
    progress: Callable[[str], None] = (lambda s: None) if o.no_progress else _progress
    stacks: StackFile | None = None
    if spec is not None:
        servers = spec.stacks
        space = Space(spec.axes)
    elif urls:
        servers, space = [], Space({})
    else:
        stacks = load(o.race.stacks_file, o.race.target.your_app, None)
        found = servers_to_tune(o.named, stacks)  # (named on the command line)
        if isinstance(found, str):
            return _fail(found)
        servers = found
        made = space_of(o.workers, o.threads, servers, stacks)
        if isinstance(made, str):
            return _fail(made)
        space = made
    o = dataclasses.replace(
        o, race=dataclasses.replace(o.race, given=probe_settings(o.race.given, servers))
    )
    built = build_plan(o.race, rerun, _named_in(o, spec))
    if built is None:
        return 2
    plan, stacks = built
    if plan.stacks:  # before anything of the stacks files runs
        announce(stacks, PROG, quiet=o.no_progress)
    if urls:
        space = Space({u.label(): {} for u in plan.urls})
        servers = list(space.servers)
    settings = plan.settings
    if not settings.slo:
        return _fail("give the objective to tune for: --slo 'p99<50ms'")
    budget = spec.budget_s if spec else (o.budget or DEFAULT_BUDGET_S)
    precision = spec.precision if spec else (o.precision or DEFAULT_PRECISION)
    plan.capacity = CapacityPlan(settings.slo, precision=precision)
    seed = spec.seed if spec else secrets.randbelow(2**31)
    rate = settings.rate
    search = TuneSearch(
        space,
        TunePlan(
            budget_s=budget,
            start=float(rate) if rate is not None else float(settings.concurrency_levels[0]),
            ceiling=1_000_000.0 if rate is not None else 4096.0,
            integer=rate is None,
            precision=precision,
        ),
        seed,
    )
    total = sum(len(space.points(sv)) for sv in space.servers)
    coarse = sum(len(space.coarse(sv)) for sv in space.servers)
    progress(
        f"tune {', '.join(servers)}: {total} configurations "
        + "; ".join(
            f"{sv} " + (", ".join(f"{k} {'/'.join(v)}" for k, v in ax.items()) or "as defined")
            for sv, ax in space.servers.items()
        )
        + f"; a coarse pass over {coarse} of them (log-spaced), then the leader's neighbours "
        f"and interleaved rounds; budget {budget:.0f}s"
    )
    shared: list[str] = []
    lock = runguard.claim_cores(PROG, o.guard.share_cores, shared, cluster=o.race.cluster.wanted)
    if lock is None:
        return runguard.EXIT_SHARED
    try:
        return _tune(o, plan, stacks, rerun, spec, search, servers, budget, precision,
                     seed, shared, resumed, progress, lock)  # fmt: skip
    finally:
        lock.release()


def _named_in(o: TuneOptions, spec: TuneSpec | None) -> str:
    """Where the servers were named: the command line, or the journal resumed (a file
    may not name an executable: stacks.variants.resolve)."""
    return COMMAND_LINE if spec is None else f"the journal {o.guard.resume}"


def _tune(
    o: TuneOptions,
    plan: object,
    stacks: StackFile,
    rerun: BenchRun | None,
    spec: TuneSpec | None,
    search: TuneSearch,
    servers: list[str],
    budget: float,
    precision: float,
    seed: int,
    shared: list[str],
    resumed: tuple[JournalStart, list[Entry]] | None,
    progress: Callable[[str], None],
    lock: runguard.runlocks.RunLock,
) -> int:
    assert isinstance(plan, BenchPlan)
    origin = provenance(plan.stacks, stacks, rerun_of=o.race.from_run)
    journal: Journal | None
    if resumed is not None:
        try:
            journal = Journal.reopen(Path(str(o.guard.resume)))
        except OSError as exc:
            return _fail(f"{o.guard.resume}: cannot append to it: {exc.strerror or exc}")
        entries = resumed[1]
        progress(f"resuming {o.guard.resume}: {len(entries)} entries measured before")
    else:
        where = runguard.journal_path(o.guard.journal, [o.files.json_out, o.files.md_out], "tune")
        start = JournalStart(
            command="tune",
            run=skeleton(plan, origin),
            tune=TuneSpec(
                stacks=servers, axes=search.space.servers, seed=seed, budget_s=budget,
                precision=precision,
            ),
            outputs=runguard.record_outputs(where, o.files),
        )  # fmt: skip
        journal, entries = runguard.open_journal(PROG, where, start), []
        if journal is not None:
            progress(f"journal: {where} (every probe as it ends; --resume continues it)")
    job = TuneJob(
        bench=plan,
        resolve=lambda name: resolve(name, stacks, named_in=_named_in(o, spec)),
        urls={u.label(): u for u in plan.urls},
        journal=journal,
        resume=entries,
    )
    cluster = None
    parts = None
    if o.race.cluster.wanted:
        joined = cluster_parts(o.race.cluster, PROG)
        if joined is None:
            if journal is not None:
                journal.close()
            return 2
        cluster, parts = joined
    plan.noise = noise_meter(parts)
    state = TuneState(search)
    db = None
    interrupted: str | None = None
    try:
        if WORKLOADS[plan.settings.workload].needs_db and cluster is None:
            opened_db = open_for_workload()
            if opened_db is None:
                if journal is not None:
                    journal.close()
                return 2
            db, plan.db_env = opened_db

            plan.database = DbWatch(db.settings)

        async def work() -> None:
            if cluster is not None and WORKLOADS[plan.settings.workload].needs_db:
                plan.db_env = await cluster.database_env()
            await run_tune(job, state, progress, parts)

        async def main() -> str | None:
            hooks = [cluster.on_app_lost.append] if cluster is not None else []
            _, why = await runguard.interruptible(work(), PROG, hooks)
            return why

        try:
            interrupted = asyncio.run(main())
        except ResumeError as exc:
            if journal is not None:
                journal.close()
            return _fail(f"{o.guard.resume}: {exc}")
    finally:
        if db is not None:
            db.close()
        if cluster is not None:
            cluster.close()
    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # only writing is left
    progress(f"tune took {_took(state):.0f}s of a {budget:.0f}s budget")
    runguard.late_sharers(lock, shared)  # a run that came onto these cores meanwhile
    result = tune_result(job, state, interrupted, shared)
    result = msgspec.structs.replace(result, provenance=origin)
    tunereport.add_deploy(result, stacks)
    result.journal = str(journal.path) if interrupted and journal is not None else ""
    problems = write(o.files, result)
    kept = runguard.finish_journal(journal, interrupted, keep=bool(problems))
    status = show(result, problems)
    if interrupted:
        with contextlib.suppress(OSError):
            head = f"interrupted ({interrupted}); "
            print(runguard.kept_line(PROG, journal, kept, "probe", head), file=sys.stderr)
        return 130
    return status


def _took(state: TuneState) -> float:

    return time.monotonic() - state.started
