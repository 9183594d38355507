"""The cluster options of a command, typed, and turning them into a `ClusterRun`.

Importing this module costs nothing: Ray is imported only by `connect`, when a cluster
was asked for. The flags that fill `ClusterOptions` are commands/cluster_args.py's.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stackrace.cluster.errors import ClusterError
from stackrace.settings.units import parse_duration

if TYPE_CHECKING:
    from stackrace.cluster.placement import NodePlacement
    from stackrace.cluster.run import ClusterRun


@dataclass(frozen=True)
class ClusterOptions:
    """`--cluster ADDRESS` and the placement flags, as given (durations as written: they
    are checked with the placement, so one error names its flag)."""

    address: str | None = None
    placement_file: str | None = None
    load_nodes: tuple[str, ...] = ()
    app_node: str | None = None
    db_node: str | None = None
    timeout: str | None = None
    lost_after: str | None = None

    @property
    def wanted(self) -> bool:
        return bool(self.address or self.placement_file)


def placement_of(o: ClusterOptions) -> NodePlacement:
    # the placement file's reader (tomllib, msgspec) is imported when a cluster is asked
    # for: every command reads these options
    from stackrace.cluster import placement  # lazy: keeps every command's start-up fast

    given = o.placement_file
    base = placement.load_placement(given) if given else placement.NodePlacement()
    try:
        timeout = parse_duration(o.timeout) if o.timeout else None
    except ValueError as exc:
        raise ClusterError(f"--cluster-timeout: {exc}") from None
    try:
        lost_after = parse_duration(o.lost_after) if o.lost_after else None
    except ValueError as exc:
        raise ClusterError(f"--cluster-lost-after: {exc}") from None
    return placement.with_flags(
        base,
        load_nodes=list(o.load_nodes) or None,
        app_node=o.app_node,
        db_node=o.db_node,
        timeout=timeout,
        lost_after=lost_after,
    )


def connect(o: ClusterOptions, prog: str) -> ClusterRun | None:
    """The run for these options, or None after one line on stderr saying why not."""
    try:
        placement = placement_of(o)
        # the cluster's run imports Ray, paid only with --cluster
        from stackrace.cluster.run import ClusterRun  # lazy: keeps start-up fast

        return ClusterRun.connect(o.address, placement)
    except ClusterError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return None
