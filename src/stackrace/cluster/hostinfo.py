"""What an actor reports about its node when it is ready, and the check that the node runs
the same stackrace as the driver.

Ray ships the actor's class by reference (module and name), so the node must have
stackrace installed; what it cannot tell is whether that install speaks the driver's
channel. The fingerprint of the engine's wire types (channel.py, model.py) says so: a
node with another version fails here with a clear message instead of sending reports
the driver cannot decode.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import socket
from dataclasses import dataclass
from pathlib import Path

import stackrace
from stackrace.cluster.errors import ClusterError
from stackrace.engine import channel, model


@dataclass(frozen=True)
class HostInfo:
    node_id: str
    hostname: str
    pid: int
    python: str  # major.minor
    stackrace: str
    protocol: str
    cores: tuple[int, ...]
    nice: int = 0  # the actor's niceness, which its engine process or stacks inherit


def normal_priority() -> int:
    """Back to niceness 0, if allowed; the niceness now.

    Ray starts its workers at niceness 15 (`RAY_worker_niceness`), and an actor's children
    inherit it: the engine process on a load host, the stacks on the app host. On a busy
    host they would then get a sliver of a core against anything at 0 — the measurement
    and the measured alike. Raising priority back needs root (CAP_SYS_NICE); without it
    the niceness stays, and the actor reports it (start the nodes with
    RAY_worker_niceness=0, docs/cluster.md). Niceness is a thread's on Linux: call it
    from the thread that starts the children."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, 0)  # Linux: this thread (the one that forks)
    return os.getpriority(os.PRIO_PROCESS, 0)


def protocol_fingerprint() -> str:
    h = hashlib.sha256()
    for mod in (channel, model):
        h.update(Path(mod.__file__ or "").read_bytes())
    return h.hexdigest()[:16]


def current_node_id() -> str:
    """The node this actor runs on, as Ray knows it (not as it was asked for)."""
    import ray  # lazy: only ever called inside an actor, where Ray is loaded

    return ray.get_runtime_context().get_node_id()


def this_host(node_id: str) -> HostInfo:
    return HostInfo(
        node_id=node_id,
        hostname=socket.gethostname(),
        pid=os.getpid(),
        python=".".join(platform.python_version_tuple()[:2]),
        stackrace=stackrace.__version__,
        protocol=protocol_fingerprint(),
        cores=tuple(sorted(os.sched_getaffinity(0))),
        nice=os.getpriority(os.PRIO_PROCESS, 0),
    )


def check_compatible(info: HostInfo, where: str, node_id: str = "") -> None:
    """Refuse a node whose Python or stackrace differs from the driver's, or an actor
    that is not on the node it was placed on."""
    if node_id and info.node_id != node_id:
        raise ClusterError(f"{where}: placed on node {node_id[:12]}, runs on {info.node_id[:12]}")
    mine = this_host("")
    if info.python != mine.python:
        raise ClusterError(
            f"{where} runs Python {info.python}, the driver {mine.python}: every node needs "
            "the same Python and stackrace"
        )
    if info.stackrace != mine.stackrace or info.protocol != mine.protocol:
        raise ClusterError(
            f"{where} has stackrace {info.stackrace} (engine protocol {info.protocol}), the "
            f"driver {mine.stackrace} ({mine.protocol}): install the same stackrace on "
            "every node"
        )
