"""`stackrace bench`'s plan from its command line (and tune's): the settings (defaults,
a --preset or a --from run, the options over them), the stacks file and the stacks
chosen in it, the servers given by --url, each checked before anything starts; a
refusal is one line naming the option, file or stack. It takes the typed `RaceOptions`
(commands/bench_args.py), never the command line's Namespace."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import msgspec

from stackrace.base import printable
from stackrace.cluster.errors import ClusterError
from stackrace.cluster.options import connect
from stackrace.commands._common import (
    load,
    resolve_all,
    serves_workload,
)
from stackrace.commands.settings_args import stacks_written_in, with_given
from stackrace.race.bench.protocol import BenchPlan
from stackrace.race.core import streams
from stackrace.race.core.capacity_plan import CapacityPlan
from stackrace.race.core.placement import cpus_problem
from stackrace.race.core.presets import load_preset, preset_path
from stackrace.race.core.urls import check_paths, url_targets
from stackrace.report.provenance import definition_changes, recorded_stacks
from stackrace.report.schema import BenchRun
from stackrace.settings.parsers import usable_cpus
from stackrace.settings.race_settings import RaceSettings
from stackrace.stacks.catalogue import StackFile
from stackrace.stacks.userapp import (
    default_app_stacks,
    install_hint,
    left_out_note,
    missing_servers,
)

if TYPE_CHECKING:
    from stackrace.cluster.options import ClusterOptions
    from stackrace.cluster.run import ClusterRun
    from stackrace.commands.bench_args import RaceOptions
    from stackrace.race.core.members import RaceParts


def capacity_plan(
    budget: float | None, precision: float | None, settings: RaceSettings
) -> CapacityPlan | None:
    """The search asked for (--budget, --precision), checked: it needs an objective,
    and a timed level."""
    if not settings.slo:
        fail("--capacity searches under an objective: give --slo, e.g. --slo 'p99<50ms'")
        return None
    if settings.requests:
        fail("--capacity times each probe: --requests (a level of N requests) does not apply")
        return None
    return CapacityPlan(
        settings.slo, budget_s=budget, precision=precision or CapacityPlan.precision
    )


def fail(message: str) -> None:
    print(f"stackrace bench: {printable.terminal(str(message))}", file=sys.stderr)


def cluster_parts(
    o: ClusterOptions, prog: str, cpus: int | None = None
) -> tuple[ClusterRun, RaceParts] | None:
    """bench's and tune's --cluster: the cluster's run and its race parts (the stacks on
    the app node, the engines on the load nodes, `--cpus` checked against the app
    node's cores), or None after one line saying why not, the run closed again."""
    cluster = connect(o, prog)
    if cluster is None:
        return None
    from stackrace.cluster.frontends import bench_parts  # lazy: only with --cluster

    try:
        parts = bench_parts(cluster)
        problem = cpus_problem(cpus, parts.cores, engine_here=False)
        if problem:
            raise ClusterError(f"{problem} (the app node)")
    except ClusterError as exc:
        cluster.close()
        print(f"{prog}: {printable.terminal(str(exc))}", file=sys.stderr)
        return None
    return cluster, parts


def build_settings(o: RaceOptions, rerun: BenchRun | None = None) -> RaceSettings | None:
    base = rerun.settings.race_settings() if rerun is not None else RaceSettings()
    if o.preset:
        base = load_preset(o.preset).settings
    return with_given(base, o.given, app_given=bool(o.target.your_app.app))


def build_plan(
    o: RaceOptions, rerun: BenchRun | None = None, named_in: str | None = None
) -> tuple[BenchPlan, StackFile] | None:
    """The plan of a bench run (or of tune's); `named_in`: where the stacks were written
    when the caller knows better than the options (tune --resume: its journal)."""
    settings = build_settings(o, rerun)
    if settings is None:
        return None
    stacks = _stacks(o, rerun, settings)
    if stacks is None:
        return None
    if not settings.stacks and stacks.generated:
        chosen_names, others = default_app_stacks(stacks)
        chosen_names += [n for n, what in stacks.generated.items() if what == "--cmd"]
        if not chosen_names:
            fail(
                f"no server that runs your app is installed where it runs ({', '.join(others)}"
                f" can): `{install_hint(stacks)}` installs the common ones there"
            )
            return None
        if others:
            print(f"stackrace bench: {left_out_note(chosen_names, others)}", file=sys.stderr)
        settings = msgspec.structs.replace(settings, stacks=chosen_names)
    if not settings.stacks and not o.target.urls:
        fail("name the stacks (--stacks A,B), a --preset, or servers you started (--url)")
        return None
    h2 = streams.h2_speakers(settings.stacks, settings.http2)
    conflict = streams.h2_conflict(h2, settings.keepalive, settings.clients)
    if conflict:  # the one rule of every front end, before anything starts
        fail(conflict)
        return None
    if not o.cluster.wanted:  # (a cluster's app node is checked once it is known)
        problem = cpus_problem(settings.cpus, usable_cpus())
        if problem:
            fail(problem)
            return None
    if settings.own_requests:
        settings.request_kinds()  # read and checked before anything starts
    preset_file = preset_path(o.preset) if o.preset else None
    if named_in is None:
        named_in = stacks_written_in(
            o.given, preset_file, o.from_run if rerun is not None else None
        )
    chosen = (
        resolve_all([",".join(settings.stacks)], stacks, named_in=named_in)
        if settings.stacks
        else []
    )
    missing = missing_servers(settings.stacks, stacks)
    if missing:
        fail(missing)
        return None
    if not settings.own_requests and not serves_workload(
        chosen, settings.workload, "stackrace bench"
    ):
        return None
    t = o.target
    urls = url_targets(t.urls, t.pids, t.allow_remote, [s.name for s in chosen])
    check_paths(urls, settings.own_requests)
    if urls and o.cluster.wanted:
        fail("--url and --cluster: a cluster run loads only the stacks it starts on its app node")
        return None
    preset = rerun.settings.preset if rerun is not None else o.preset
    plan = BenchPlan(
        stacks=chosen,
        settings=settings,
        preset=preset,
        stacks_file=o.stacks_file,
        urls=urls,
        allow_remote=o.target.allow_remote,
    )
    return plan, stacks


def _stacks(o: RaceOptions, rerun: BenchRun | None, settings: RaceSettings) -> StackFile | None:
    """The stacks file in use. With --from, the run's recorded blocks are compared with
    it and never started (report/provenance.py says why): a difference in what runs is
    refused unless --accept-definition-changes. A run of your app, or of --cmd stacks,
    is run again only when the command line gives --app (or --cmd) again: the run
    file's interpreter, directory or command line is never taken from it; nor is a
    file it read its requests from."""
    if rerun is not None:
        refused = _needs_again(o, rerun)
        if refused:
            fail(f"{o.from_run} {refused}")
            return None
    stacks = load(o.stacks_file, o.target.your_app, settings)
    if rerun is None:
        return stacks
    recorded_stacks(rerun, str(o.from_run))  # a malformed record is an error, not ignored
    runs, described = definition_changes(rerun, stacks)
    if runs and not o.accept_definition_changes:
        fail(
            f"{o.from_run} ran stacks defined differently from {stacks.source} now "
            f"({'; '.join(runs)}): give --accept-definition-changes to run them as "
            "defined now, or --stacks-file with the file it ran"
        )
        return None
    for line in runs + described:
        print(
            f"stackrace bench: note: {line} differs from {o.from_run}; "
            f"run as defined in {stacks.source}",
            file=sys.stderr,
        )
    return stacks


def _needs_again(o: RaceOptions, rerun: BenchRun) -> str:
    """What a rerun needs from the command line rather than from the run file."""
    names = [s.name for s in rerun.stacks]
    if any("[app]" in n for n in names) and not o.target.your_app.app:
        return "raced your app: give --app (and --python, --app-dir, --env) again to run it again"
    # (a --cmd stack is resolved by name like any other: without --cmd, "no stack" says so)
    by_hand = [st.name for st in rerun.stacks if st.url]
    if by_hand and not o.target.urls:
        return (
            f"raced servers you started ({', '.join(by_hand)}): give --url NAME=URL "
            "(and --pid) again to race them again"
        )
    s = rerun.settings
    if s.scenario and o.given.get("scenario") is None:
        return f"read its requests from {s.scenario}: give --scenario FILE again"
    if s.body_file and o.given.get("body_file") is None:
        return f"read its request body from {s.body_file}: give --body-file FILE again"
    return ""
