"""The cluster options every command shares, and turning them into a `ClusterRun`.

Importing this module costs nothing: Ray is imported only by `connect_from_args`, when
`--cluster` was given.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from stackrace.base import paths
from stackrace.cluster.errors import ClusterError
from stackrace.cluster.placement import NodePlacement, load_placement, with_flags
from stackrace.settings.units import parse_duration

if TYPE_CHECKING:
    from stackrace.cluster.run import ClusterRun


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group(
        "cluster",
        f"run on a Ray cluster (needs pip install 'stackrace[cluster]'; {paths.doc('cluster.md')})",
    )
    g.add_argument(
        "--cluster",
        metavar="ADDRESS",
        default=None,
        help="the Ray cluster's head (host:port, or auto): engine processes run on its load "
        "nodes, stacks on its app node",
    )
    g.add_argument(
        "--placement",
        metavar="FILE",
        default=None,
        help="cluster.toml: which node takes which role",
    )
    g.add_argument(
        "--load-node",
        action="append",
        metavar="NODE",
        default=None,
        help="a node for engine processes (KEY=VALUE label, id:HEX or address); repeat it for "
        "more (default: label stackrace-role=load)",
    )
    g.add_argument(
        "--app-node",
        metavar="NODE",
        default=None,
        help="the node for the stacks (default: label stackrace-role=app)",
    )
    g.add_argument(
        "--db-node",
        metavar="NODE",
        default=None,
        help="the node for MariaDB (default: the app node)",
    )
    g.add_argument(
        "--cluster-timeout",
        metavar="DURATION",
        default=None,
        help="how long a role may take to come up before the run fails (default 30s)",
    )
    g.add_argument(
        "--cluster-lost-after",
        metavar="DURATION",
        default=None,
        help="a load or app host silent this long is lost: the race goes on without a "
        "load host (its requests in flight count abandoned) and ends without the app host "
        "(default 10s)",
    )


def placement_from_args(args: argparse.Namespace) -> NodePlacement:
    base = load_placement(args.placement) if args.placement else NodePlacement()
    try:
        timeout = parse_duration(args.cluster_timeout) if args.cluster_timeout else None
    except ValueError as exc:
        raise ClusterError(f"--cluster-timeout: {exc}") from None
    lost = getattr(args, "cluster_lost_after", None)
    try:
        lost_after = parse_duration(lost) if lost else None
    except ValueError as exc:
        raise ClusterError(f"--cluster-lost-after: {exc}") from None
    return with_flags(
        base,
        load_nodes=args.load_node,
        app_node=args.app_node,
        db_node=args.db_node,
        timeout=timeout,
        lost_after=lost_after,
    )


def wants_cluster(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "cluster", None) or getattr(args, "placement", None))


def connect_from_args(args: argparse.Namespace, prog: str) -> ClusterRun | None:
    """The run for these options, or None after one line on stderr saying why not."""
    try:
        placement = placement_from_args(args)
        from stackrace.cluster.run import ClusterRun

        return ClusterRun.connect(args.cluster, placement)
    except ClusterError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return None
