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
    from stackrace.tui.app import StackraceApp


def run(o: AppCommandOptions) -> int:
    from stackrace.stacks.catalogue import load_stacks
    from stackrace.stacks.definition import ConfigError

    try:
        load_stacks(o.app.stacks_file)
    except ConfigError as exc:
        if not o.app.urls:
            print(f"stackrace: {printable.terminal(str(exc))}", file=sys.stderr)
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
        return _run(o, exporter)
    finally:
        if exporter is not None:
            exporter.close()


def _run(o: AppCommandOptions, exporter: MetricsExporter | None) -> int:
    if o.cluster.wanted:  # checked before the TUI is imported
        return _run_on_cluster(o, exporter)
    return run_app(o.app, exporter=exporter)


def make_app(o: AppOptions, parts: RaceParts | None = None) -> StackraceApp:
    """The app for this command line, ready to run: what `stackrace` runs, and what the
    walkthrough tests open with Pilot. A bad argument is an AppSetupError."""
    from stackrace.race.live.setup import app_race
    from stackrace.tui.app import StackraceApp

    return StackraceApp.for_race(app_race(o, parts))


def run_app(
    o: AppOptions,
    parts: RaceParts | None = None,
    exporter: MetricsExporter | None = None,
) -> int:
    """Open the app and run it to its end; `exporter` (--metrics) follows its race."""
    from stackrace.tui.app import exit_status

    app = make_app(o, parts)  # an AppSetupError is said by cli.py, before any screen
    _announce(o)
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


def _announce(o: AppOptions) -> None:
    """The stacks files read, on the terminal the app returns to (and in the app when one
    is not the package's own: race/setup.py)."""
    if o.demo:
        return
    import contextlib

    from stackrace.commands._common import announce
    from stackrace.stacks.catalogue import load_stacks
    from stackrace.stacks.definition import ConfigError

    with contextlib.suppress(ConfigError):  # only --url targets: no stacks file is used
        announce(load_stacks(o.stacks_file))


def _run_on_cluster(o: AppCommandOptions, exporter: MetricsExporter | None) -> int:
    """`stackrace --cluster ADDRESS`: the same app, its stacks on the cluster's app node
    and each stack's engine processes on its load nodes (stackrace.cluster)."""
    from stackrace.cluster.errors import ClusterError
    from stackrace.cluster.frontends import app_parts
    from stackrace.cluster.options import connect
    from stackrace.stacks.catalogue import load_stacks

    cluster = connect(o.cluster, "stackrace")
    if cluster is None:
        return 2
    try:
        parts = app_parts(cluster, load_stacks(o.app.stacks_file))
        return run_app(o.app, parts, exporter=exporter)
    except ClusterError as exc:
        print(f"stackrace: {printable.terminal(str(exc))}", file=sys.stderr)
        return 2
    finally:
        cluster.close()
