"""`stackrace --cluster ADDRESS`: the app, its stacks on the cluster's app node and each
stack's engine processes on its load nodes (stackrace.cluster).

The cluster is a second front end over the app's command, not a branch inside it: cli.py
hands a command line with `--cluster` (or `--placement`) here, and this module hands
commands/app.py the one thing that differs, where the race's parts are made
(`cluster_parts`). So the app's own start-up (commands/app.py `run`) never passes
through the cluster's connection, placement and roles, and the arrow runs one way:
this module uses the app's command, never the reverse.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

from stackrace.base import printable
from stackrace.cluster.errors import ClusterError
from stackrace.cluster.frontends import app_parts
from stackrace.cluster.options import ClusterOptions, placement_of
from stackrace.cluster.run import ClusterRun
from stackrace.commands import app
from stackrace.commands.app_args import AppCommandOptions
from stackrace.race.core.members import RaceParts
from stackrace.stacks.definition import ConfigError
from stackrace.stacks.resolved import ResolvedRun


def run(o: AppCommandOptions) -> int:
    """The app on the cluster `o.cluster` names; a cluster or stacks error is one line,
    exit 2."""
    try:
        return app.run(o, partial(cluster_parts, o.cluster))
    except (ClusterError, ConfigError) as exc:
        print(f"stackrace: {printable.terminal(str(exc))}", file=sys.stderr)
        return 2


@contextmanager
def cluster_parts(o: ClusterOptions, run_stacks: ResolvedRun) -> Iterator[RaceParts]:
    """The race's engine and stacks' source placed on the cluster, for as long as the app
    runs (a ClusterError when it cannot be reached); the picker offers what the app node
    can start, from the catalogue the command read."""
    cluster = ClusterRun.connect(o.address, placement_of(o))
    try:
        yield app_parts(cluster, run_stacks.stacks())
    finally:
        cluster.close()
