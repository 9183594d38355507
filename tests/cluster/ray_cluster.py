"""A three-node Ray cluster on this machine, on loopback only, for the cluster tests.

    python tests/cluster/ray_cluster.py     prints one JSON line {"address", "nodes"} when
                                            the nodes are up; shuts them down when its
                                            stdin closes (or it is killed: Ray's reaper)

Nodes: "head" (where a driver on this machine attaches; no CPUs to schedule on),
"load" (label stackrace-role=load) and "app" (label stackrace-role=app). It runs in a
process of its own so that the test process is only ever a driver, as a user's is.
Run it with RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 (stackrace.cluster.run.local_cluster_env):
without it Ray turns 127.0.0.1 into the machine's outward address.
"""

from __future__ import annotations

import json
import sys

from ray.cluster_utils import Cluster

ROLES = ("load", "app")


def main() -> None:
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 0,
            "node_ip_address": "127.0.0.1",
            "include_dashboard": False,
            "labels": {"stackrace-role": "head"},
        },
    )
    assert cluster.head_node is not None  # initialize_head=True
    nodes = {"head": cluster.head_node.node_id}
    for role in ROLES:
        node = cluster.add_node(
            num_cpus=1, node_ip_address="127.0.0.1", labels={"stackrace-role": role}
        )
        nodes[role] = node.node_id
    cluster.wait_for_nodes()
    print(json.dumps({"address": cluster.address, "nodes": nodes}), flush=True)
    try:
        sys.stdin.read()  # until the test closes our stdin
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
