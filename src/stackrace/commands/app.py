"""`stackrace` with no subcommand: open the live comparator (the Textual app).

The wiring is here and in race/live/setup.py, not in the UI: the race is made from the
command line (`app_race`), the metrics exporter is bound before anything starts and
handed to `run_app` by name, and the app receives the ready race and shows it.
`make_app(options)` is the same app without running it: what the walkthrough tests and
scripts/screenshots.py open with Pilot. Every function here takes the command line as
typed (`AppCommandOptions`, read by commands/app_args.py), never the Namespace.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from stackrace.base import printable

if TYPE_CHECKING:
    from stackrace.commands.app_args import AppCommandOptions
    from stackrace.metrics.exporter import MetricsExporter
    from stackrace.race.core.members import RaceParts
    from stackrace.race.live.setup import AppOptions
    from stackrace.stacks.resolved import ResolvedRun
    from stackrace.tui.app import StackraceApp


def run(o: AppCommandOptions) -> int:
    from stackrace.stacks.resolved import resolve_run  # here: keeps `--help` fast

    # the run's catalogue, read once here and handed down (stacks/resolved.py)
    run_stacks = resolve_run(o.app.stacks_file)
    if run_stacks.error is not None and not o.app.urls:
        print(f"stackrace: {printable.terminal(str(run_stacks.error))}", file=sys.stderr)
        return 2
    if not o.app.demo and not o.cluster.address:
        # before the screen opens: a read-only home is one line here, not a crash later
        from stackrace.base.paths import writable_dir
        from stackrace.stacks.run_roots import RUNS_MADE_FOR, runs_dir

        writable_dir(runs_dir(), "its run directories", "STACKRACE_RUNS_DIR", RUNS_MADE_FOR)
    from stackrace.metrics.exporter import open_exporter

    # bound before anything starts: a port in use is one line, not a broken screen
    exporter = open_exporter(o.metrics, "stackrace")
    try:
        return _run(o, exporter, run_stacks)
    finally:
        if exporter is not None:
            exporter.close()


def _run(o: AppCommandOptions, exporter: MetricsExporter | None, run_stacks: ResolvedRun) -> int:
    if o.cluster.wanted:  # checked before the TUI is imported
        return _run_on_cluster(o, exporter, run_stacks)
    return run_app(o.app, run_stacks, exporter=exporter)


def make_app(
    o: AppOptions, parts: RaceParts | None = None, run_stacks: ResolvedRun | None = None
) -> StackraceApp:
    """The app for this command line, ready to run: what `stackrace` runs, and what the
    walkthrough tests open with Pilot; `run_stacks`: the catalogue read (None: read
    once, by the race's set-up). A bad argument is an AppSetupError."""
    from stackrace.race.live.setup import app_race
    from stackrace.tui.app import StackraceApp

    return StackraceApp.for_race(app_race(o, parts, run_stacks))


def run_app(
    o: AppOptions,
    run_stacks: ResolvedRun,
    parts: RaceParts | None = None,
    exporter: MetricsExporter | None = None,
) -> int:
    """Open the app and run it to its end; `run_stacks`: the catalogue `run` read (once);
    `exporter` (--metrics) follows its race."""
    from stackrace.tui.app import exit_status

    app = make_app(o, parts, run_stacks)  # an AppSetupError is said by cli.py, first
    _announce(o, run_stacks)
    from stackrace.race.core.runlocks import RunLock

    # other runs (bench, tune: race/core/runlocks.py) see this one on their cores; a demo
    # loads nothing, and a cluster's load is on other hosts
    lock = None if o.demo or parts is not None else RunLock.take("app")
    try:
        if exporter is not None:
            exporter.follow_core(app.session.core)
            rc = exporter.run_beside(app.run_async) or 0
        else:
            rc = app.run() or 0
    finally:
        if lock is not None:
            lock.release()
    return exit_status(app, rc)


def _announce(o: AppOptions, run_stacks: ResolvedRun) -> None:
    """The stacks files read, on the terminal the app returns to (and in the app when one
    is not the package's own: race/setup.py)."""
    if o.demo or run_stacks.catalogue is None:
        return  # (no catalogue: only --url targets, no stacks file is used)
    from stackrace.commands._common import announce

    announce(run_stacks.catalogue)


def _run_on_cluster(
    o: AppCommandOptions, exporter: MetricsExporter | None, run_stacks: ResolvedRun
) -> int:
    """`stackrace --cluster ADDRESS`: the same app, its stacks on the cluster's app node
    and each stack's engine processes on its load nodes (stackrace.cluster)."""
    from stackrace.cluster.errors import ClusterError
    from stackrace.cluster.frontends import app_parts
    from stackrace.cluster.options import connect
    from stackrace.stacks.definition import ConfigError

    cluster = connect(o.cluster, "stackrace")
    if cluster is None:
        return 2
    try:
        parts = app_parts(cluster, run_stacks.stacks())
        return run_app(o.app, run_stacks, parts, exporter=exporter)
    except (ClusterError, ConfigError) as exc:
        print(f"stackrace: {printable.terminal(str(exc))}", file=sys.stderr)
        return 2
    finally:
        cluster.close()
