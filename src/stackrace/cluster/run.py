"""`ClusterRun`: one command's connection to a Ray cluster, its roles placed on nodes.

    run = ClusterRun.connect("10.0.0.1:6379", placement)   # fails fast: Ray, nodes, roles
    engine = run.engine(settings, per_target=True)          # engine processes on load nodes
    launcher = await run.launcher()                         # stacks on the app node
    ...
    run.close()                                             # actors killed, Ray let go

This is the whole surface the commands use; everything else in the package is behind it.
Ray is imported here, lazily, and only when a command was given `--cluster`, so the
single-machine path never loads it (nor starts any Ray process).

Where the stacks listen (`{host}`): on loopback when every load node has the app node's
address (one machine, as the tests' local cluster), else on the app node's own address,
the one Ray reaches it at — the address the load nodes then connect to. Load may go only
to loopback or to the cluster's node addresses (netguard.require_loopback_or_member).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Callable
from typing import Any

from stackrace.cluster.app_actor import AppHost, DbHost
from stackrace.cluster.app_role import RemoteLauncher, call
from stackrace.cluster.engine_actor import EngineHost
from stackrace.cluster.errors import ClusterError, PlacementError, RayMissing
from stackrace.cluster.hostinfo import HostInfo, check_compatible
from stackrace.cluster.load_role import ClusterEngine, RayLinks, first_line
from stackrace.cluster.nodes import LoadSlot, NodeInfo, live_nodes, load_slots, one_node
from stackrace.cluster.placement import NodePlacement
from stackrace.engine.model import EngineSettings
from stackrace.stacks.placeholders import HOST

# Ray's switch for multi-host clusters; "0" makes it take loopback as the node address
_RAY_LOCAL_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def import_ray() -> Any:
    """Ray, or RayMissing saying how to install it."""
    try:
        import ray  # lazy: only with --cluster
    except ImportError:
        raise RayMissing() from None
    return ray


def _host_port(address: str) -> tuple[str, int] | None:
    rest = address.split("://", 1)[-1]
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast when nothing listens at the head's address: Ray's own connect retries
    for minutes, printing warnings."""
    hp = _host_port(address)
    if hp is None:
        return  # "auto": Ray finds the local cluster itself
    try:
        socket.create_connection(hp, timeout=timeout).close()
    except OSError as exc:
        raise ClusterError(
            f"nothing answers at {address} ({exc.strerror or exc}): is the Ray head "
            "running there (ray start --head)?"
        ) from None


def prefer_loopback(address: str) -> None:
    """A head on loopback is a one-machine cluster: keep Ray on loopback too. Without
    this Ray rewrites 127.0.0.1 to the machine's outward address when it connects, where
    a head started with --node-ip-address 127.0.0.1 does not listen. (Ray reads it when
    it is first imported.)"""
    hp = _host_port(address)
    if hp is not None and hp[0] in ("127.0.0.1", "localhost", "::1"):
        os.environ.setdefault(_RAY_LOCAL_ONLY, "0")


class ClusterRun:
    def __init__(self, ray: Any, placement: NodePlacement, nodes: list[NodeInfo]) -> None:
        self.ray = ray
        self.placement = placement
        self.nodes = nodes
        self.slots: list[LoadSlot] = load_slots(placement, nodes)
        self._app: NodeInfo | None = None
        self._actors: list[Any] = []
        self._engine_host = ray.remote(EngineHost)
        self._app_host = ray.remote(AppHost)
        self._db_host = ray.remote(DbHost)
        self._db_env: dict[str, str] | None = None
        self._app_actor: Any = None
        self.app_info: HostInfo | None = None
        # told, once, when the app host is lost (RemoteLauncher): bench ends its run
        self.app_lost = ""
        self.on_app_lost: list[Callable[[str], None]] = [self._app_was_lost]

    @classmethod
    def connect(cls, address: str | None, placement: NodePlacement) -> ClusterRun:
        """Join the cluster as its driver and resolve the load role (the app and db roles
        are resolved when first used, still before any load)."""
        address = address or placement.address
        if not address:
            raise ClusterError("which cluster? --cluster ADDRESS (host:port of its head, or auto)")
        prefer_loopback(address)
        ray = import_ray()
        check_reachable(address)
        try:
            ray.init(
                address=address,
                # a namespace of its own: nothing of another run's is found by name
                namespace=f"stackrace-{uuid.uuid4().hex[:8]}",
                log_to_driver=False,  # the nodes' output would run through the terminal
                logging_level=logging.WARNING,
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ClusterError(f"cannot join the Ray cluster at {address}: {exc}") from None
        try:
            return cls(ray, placement, live_nodes())
        except BaseException:
            ray.shutdown()
            raise

    # --- roles ------------------------------------------------------------------------

    @property
    def members(self) -> set[str]:
        """The addresses load may go to besides loopback: the cluster's own nodes."""
        return {n.address for n in self.nodes}

    @property
    def app_node(self) -> NodeInfo:
        if self._app is None:
            self._app = one_node("app", self.placement.app, self.nodes)
        return self._app

    @property
    def bind_host(self) -> str:
        """Where the stacks listen: see the module docstring."""
        app = self.app_node.address
        return HOST if all(s.node.address == app for s in self.slots) else app

    def _place(self, cls: Any, node: NodeInfo, *args: Any) -> Any:
        from ray.util.scheduling_strategies import (
            NodeAffinitySchedulingStrategy,  # lazy: only with --cluster
        )

        actor = cls.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.id, soft=False), num_cpus=0
        ).remote(node.id, *args)
        self._actors.append(actor)
        return actor

    def _ready(self, actor: Any, role: str, node: NodeInfo) -> HostInfo:
        """Wait (bounded) until an actor runs on its node and runs our stackrace."""
        ray = self.ray
        try:
            info = ray.get(actor.ready.remote(), timeout=self.placement.timeout)
        except (TimeoutError, ray.exceptions.GetTimeoutError):
            ray.kill(actor)
            raise ClusterError(
                f"the {role} host on {node.describe()} was not ready within "
                f"{self.placement.timeout:g}s (is stackrace installed there?)"
            ) from None
        except ray.exceptions.RayError as exc:
            raise ClusterError(
                f"the {role} host on {node.describe()} could not start: {first_line(exc)}"
            ) from None
        check_compatible(info, f"{role} node {node.address}", node.id)
        return info

    def app_host(self) -> Any:
        """The AppHost actor on the app node, placed and ready (once per run)."""
        if self._app_actor is None:
            node = self.app_node
            actor = self._place(self._app_host, node, self.bind_host, self.placement.lost_after)
            self.app_info = self._ready(actor, "app", node)
            self._app_actor = actor
        return self._app_actor

    def _app_was_lost(self, why: str) -> None:
        self.app_lost = why

    # --- what the commands use --------------------------------------------------------

    def engine(
        self,
        settings: EngineSettings | None = None,
        *,
        per_target: bool = False,
        procs: int | None = None,
        warmup: float = 0.0,
    ) -> ClusterEngine:
        """An Engine whose processes run on the load nodes: per target (races), `procs`
        processes each, by default one per load slot; shared (load), one per slot."""
        return ClusterEngine(
            settings,
            links=RayLinks(
                self.slots, self._engine_host, self.placement.timeout, self.placement.lost_after
            ),
            members=self.members,
            procs=procs or len(self.slots),
            warmup=warmup,
            per_target=per_target,
            lost_after=self.placement.lost_after,
        )

    async def launcher(
        self, env: dict[str, str] | None = None, sample_in_status: bool = False
    ) -> RemoteLauncher:
        """The stacks on the app node (listening on `bind_host`), with `env` added to
        their environment."""
        actor = self.app_host()
        if env:
            # awaited: Ray does not promise an async actor's calls run in call order
            await call(actor.set_env.remote(env))
        return RemoteLauncher(
            actor,
            sample_in_status,
            where=self.app_node.address,
            lost_after=self.placement.lost_after,
            on_lost=self.on_app_lost,
        )

    async def database_env(self, rows: int = 1_000_000) -> dict[str, str]:
        """Start and seed the private MariaDB on the db node (default: the app node); the
        environment every stack gets to reach it."""
        if self._db_env is not None:
            return self._db_env
        ref = self.placement.db
        node = one_node("db", ref, self.nodes) if ref is not None else self.app_node
        if node.address != self.app_node.address:
            # the managed MariaDB listens on 127.0.0.1 only (db/mariadbd.py), so the stacks
            # must share its host; a database on another host is an external one (--db)
            raise PlacementError(
                f"the db node {node.describe()} is not on the app node's host "
                f"({self.app_node.address}): the private MariaDB listens on loopback only"
            )
        actor = self._place(self._db_host, node)
        self._ready(actor, "db", node)
        self._db_env = await call(actor.start.remote(rows), 300.0)
        await call(self.app_host().set_env.remote(self._db_env))
        return self._db_env

    def close(self) -> None:
        """Kill every actor this run placed (their processes and children go with them),
        then leave the cluster."""
        for actor in self._actors:
            with contextlib.suppress(Exception):
                self.ray.kill(actor)
        self._actors.clear()
        with contextlib.suppress(Exception):
            self.ray.shutdown()


def local_cluster_env() -> dict[str, str]:
    """The environment for the processes of a one-machine Ray cluster on loopback only
    (tests, bench/cluster_hop.py): see prefer_loopback."""
    return {**os.environ, _RAY_LOCAL_ONLY: "0"}
