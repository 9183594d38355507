"""What goes wrong in a cluster run, said so that the user knows what to do."""

from __future__ import annotations

from stackrace.base.errors import StackraceError

INSTALL_HINT = "--cluster needs Ray: pip install 'stackrace[cluster]'"


class ClusterError(StackraceError, RuntimeError):
    """A cluster run cannot start or go on; the message says why and what to do."""


class RayMissing(ClusterError):
    """Ray is not installed (the optional `cluster` extra)."""

    def __init__(self) -> None:
        super().__init__(INSTALL_HINT)


class PlacementError(ClusterError):
    """A role names no live node, or a node that cannot take it."""
