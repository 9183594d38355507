"""The cluster's live nodes and how a placement's references resolve to them.

Every role is resolved here, on the driver, to concrete node ids before anything is
started, and actors are then placed with a hard node affinity on those ids. Two reasons:
a label selector for a label no node has waits forever in Ray (it is "infeasible" and
waits for an autoscaler), while a hard affinity to a node that is gone fails at once;
and the error can list the nodes there are, with their labels, which Ray's cannot.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from stackrace.cluster.errors import PlacementError
from stackrace.cluster.placement import NodePlacement, NodeRef


@dataclass(frozen=True)
class NodeInfo:
    id: str  # hex
    address: str  # the address Ray reaches it at (NodeManagerAddress)
    hostname: str
    labels: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    cpus: float = 0.0

    def describe(self) -> str:
        own = {k: v for k, v in self.labels.items() if not k.startswith("ray.io/")}
        labels = ",".join(f"{k}={v}" for k, v in sorted(own.items())) or "no labels"
        return f"{self.id[:12]} {self.address} ({self.hostname}; {labels})"


@dataclass(frozen=True)
class LoadSlot:
    """One engine process's place: a node, and the core to pin it to there."""

    node: NodeInfo
    cpus: tuple[int, ...] = ()


def live_nodes() -> list[NodeInfo]:
    """The cluster's live nodes (needs ray.init first)."""
    import ray  # lazy: only with --cluster

    out = []
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        out.append(
            NodeInfo(
                id=n["NodeID"],
                address=n["NodeManagerAddress"],
                hostname=n.get("NodeManagerHostname", ""),
                labels=dict(n.get("Labels") or {}),
                cpus=float(n.get("Resources", {}).get("CPU", 0.0)),
            )
        )
    return out


def _addresses(name: str) -> set[str]:
    try:
        return {str(i[4][0]) for i in socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)}
    except socket.gaierror:
        return set()


def matching(ref: NodeRef, nodes: list[NodeInfo]) -> list[NodeInfo]:
    if ref.kind == "label":
        return [n for n in nodes if n.labels.get(ref.key) == ref.value]
    if ref.kind == "id":
        return [n for n in nodes if n.id.lower().startswith(ref.value)]
    wanted = _addresses(ref.value) | {ref.value}
    return [n for n in nodes if n.address in wanted or n.hostname == ref.value]


def _none_found(role: str, ref: NodeRef, nodes: list[NodeInfo]) -> PlacementError:
    listing = "\n".join(f"  {n.describe()}" for n in nodes) or "  (none)"
    return PlacementError(
        f"the {role} role names {ref}, which matches no live node of the cluster; "
        f"place it with --{role}-node or cluster.toml. Live nodes:\n{listing}"
    )


def one_node(role: str, ref: NodeRef, nodes: list[NodeInfo]) -> NodeInfo:
    """The single node a reference names (app, db): none or several is an error."""
    found = matching(ref, nodes)
    if not found:
        raise _none_found(role, ref, nodes)
    if len(found) > 1:
        names = ", ".join(n.describe() for n in found)
        raise PlacementError(
            f"the {role} role names {ref}, which matches {len(found)} nodes "
            f"({names}); name one (id:HEX or its address)"
        )
    return found[0]


def load_slots(placement: NodePlacement, nodes: list[NodeInfo]) -> list[LoadSlot]:
    """One slot per engine process, in the order processes are handed out: the nodes
    interleaved, so that n processes of a target spread over n nodes before doubling up."""
    per_node: list[list[LoadSlot]] = []
    for entry in placement.load:
        found = matching(entry.node, nodes)
        if not found:
            raise _none_found("load", entry.node, nodes)
        for node in found:
            cpus = entry.cpus
            per_node.append(
                [
                    LoadSlot(node, (cpus[i % len(cpus)],) if cpus else ())
                    for i in range(entry.engines)
                ]
            )
    slots: list[LoadSlot] = []
    for i in range(max(len(s) for s in per_node)):
        slots.extend(s[i] for s in per_node if i < len(s))
    return slots
