"""`stackrace` with no subcommand: open the live comparator (the Textual app).

The wiring is here and in race/live/setup.py, not in the UI: the race is made from the
command line (`app_race`), the metrics exporter is bound before anything starts and
handed to `run_app` by name, and the app receives the ready race and shows it.
`make_app(options)` is the same app without running it: what the walkthrough tests and
scripts/screenshots.py open with Pilot. Every function here takes the command line as
typed (`AppCommandOptions`, read by commands/app_args.py), never the Namespace.

The app on a cluster (`--cluster`) is commands/app_cluster.py's: it hands `run` the one
thing that differs, where the race's engine and stacks are made (`elsewhere`), so this
module knows nothing of clusters and its start-up never passes through them.

Every import is at the top: this module is imported only to open the app (cli.py), and
the app uses each of them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

from stackrace.base import printable
from stackrace.base.paths import writable_dir
from stackrace.commands._common import announce
from stackrace.commands.app_args import AppCommandOptions
from stackrace.metrics.exporter import MetricsExporter, open_exporter
from stackrace.race.core.members import RaceParts
from stackrace.race.core.runlocks import RunLock
from stackrace.race.live.setup import AppOptions, app_race
from stackrace.stacks.resolved import ResolvedRun, resolve_run
from stackrace.stacks.run_roots import RUNS_MADE_FOR, runs_dir
from stackrace.tui.app import StackraceApp, exit_status

# where the race's parts are made when not on this machine, for as long as the app runs,
# from the run's catalogue (a StackraceError when they cannot be)
Elsewhere = Callable[[ResolvedRun], AbstractContextManager[RaceParts]]


def run(o: AppCommandOptions, elsewhere: Elsewhere | None = None) -> int:
    """`stackrace [OPTIONS]`: the app run to its end; `elsewhere`: the race's engine
    and stacks made there (commands/app_cluster.py), not on this machine."""
    # the run's catalogue, read once here and handed down (stacks/resolved.py)
    run_stacks = resolve_run(o.app.stacks_file)
    if run_stacks.error is not None and not o.app.urls:
        print(f"stackrace: {printable.terminal(str(run_stacks.error))}", file=sys.stderr)
        return 2
    if not o.app.demo and elsewhere is None:
        # before the screen opens: a read-only home is one line here, not a crash later
        writable_dir(runs_dir(), "its run directories", "STACKRACE_RUNS_DIR", RUNS_MADE_FOR)
    # bound before anything starts: a port in use is one line, not a broken screen
    exporter = open_exporter(o.metrics, "stackrace")
    try:
        with nullcontext() if elsewhere is None else elsewhere(run_stacks) as parts:
            return run_app(o.app, run_stacks, parts, exporter=exporter)
    finally:
        if exporter is not None:
            exporter.close()


def make_app(
    o: AppOptions, parts: RaceParts | None = None, run_stacks: ResolvedRun | None = None
) -> StackraceApp:
    """The app for this command line, ready to run: what `stackrace` runs, and what the
    walkthrough tests open with Pilot; `run_stacks`: the catalogue read (None: read
    once, by the race's set-up). A bad argument is an AppSetupError."""
    return StackraceApp.for_race(app_race(o, parts, run_stacks))


def run_app(
    o: AppOptions,
    run_stacks: ResolvedRun,
    parts: RaceParts | None = None,
    exporter: MetricsExporter | None = None,
) -> int:
    """Open the app and run it to its end; `run_stacks`: the catalogue `run` read (once);
    `exporter` (--metrics) follows its race."""
    app = make_app(o, parts, run_stacks)  # an AppSetupError is said by cli.py, first
    if not o.demo and run_stacks.catalogue is not None:
        # the stacks files read, on the terminal the app returns to (and in the app when
        # one is not the package's own: race/live/setup.py); none with only --url targets
        announce(run_stacks.catalogue)
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
