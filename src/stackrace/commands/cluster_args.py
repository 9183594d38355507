"""The cluster flags every command shares (`--cluster`, `--placement`, the node and time
flags), read into the cluster package's typed `ClusterOptions`."""

from __future__ import annotations

import argparse

from stackrace.base import paths
from stackrace.cluster.options import ClusterOptions


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """The cluster group, said in one line in the command's help (`--cluster ADDRESS`):
    its other options, the same in every command, are shown by `--help-cluster`, not
    repeated at full length in every help."""
    g = parser.add_argument_group(
        "cluster",
        "run on a Ray cluster (pip install 'stackrace[cluster]'): --cluster ADDRESS; "
        f"where each role runs, and when a host counts as lost: --help-cluster, {CLUSTER_DOC}",
    )
    _cluster_options(g, shown=False)
    g.add_argument(
        "--help-cluster",
        action=_HelpCluster,
        nargs=0,
        help="show the cluster options and exit",
    )


CLUSTER_DOC = "docs/cluster.md"


class _HelpCluster(argparse.Action):
    """Print every cluster option, in full, and exit (as --help does)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        full = argparse.ArgumentParser(
            prog=parser.prog,
            usage=f"{parser.prog} --cluster ADDRESS [cluster options] …",
            description=f"Run on a Ray cluster (pip install 'stackrace[cluster]'; "
            f"{paths.doc('cluster.md')}).",
            add_help=False,
        )
        _cluster_options(full.add_argument_group("cluster options"), shown=True)
        parser.exit(0, full.format_help())


# The options --help-cluster shows (hidden in a command's own help): flag, metavar, whether
# it repeats, help. One table so that a new node or time flag is one row, not one more
# add_argument written out again.
_DETAIL_OPTIONS: tuple[tuple[str, str, bool, str], ...] = (
    ("--placement", "FILE", False, "cluster.toml: which node takes which role"),
    (
        "--load-node",
        "NODE",
        True,
        "a node for engine processes (KEY=VALUE label, id:HEX or address); repeat it "
        "for more (default: label stackrace-role=load)",
    ),
    ("--app-node", "NODE", False, "the node for the stacks (default: label stackrace-role=app)"),
    ("--db-node", "NODE", False, "the node for MariaDB (default: the app node)"),
    (
        "--cluster-timeout",
        "DURATION",
        False,
        "how long a role may take to come up before the run fails (default 30s)",
    ),
    (
        "--cluster-lost-after",
        "DURATION",
        False,
        "a load or app host silent this long is lost: the race goes on without a load "
        "host (its requests in flight count abandoned) and ends without the app host "
        "(default 10s)",
    ),
)


def _cluster_options(g: argparse._ArgumentGroup, shown: bool) -> None:
    """The cluster options; all but --cluster hidden unless `shown`."""
    g.add_argument(
        "--cluster",
        metavar="ADDRESS",
        default=None,
        help="the Ray cluster's head (host:port, or auto): engine processes run on its load "
        "nodes, stacks on its app node (default: this machine alone)",
    )
    for flag, metavar, repeats, text in _DETAIL_OPTIONS:
        g.add_argument(
            flag,
            action="append" if repeats else "store",
            metavar=metavar,
            default=None,
            help=text if shown else argparse.SUPPRESS,
        )


def cluster_options(args: argparse.Namespace) -> ClusterOptions:
    return ClusterOptions(
        address=args.cluster,
        placement_file=args.placement,
        load_nodes=tuple(args.load_node or ()),
        app_node=args.app_node,
        db_node=args.db_node,
        timeout=args.cluster_timeout,
        lost_after=args.cluster_lost_after,
    )
