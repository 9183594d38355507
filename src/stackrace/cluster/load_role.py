"""The driver's side of the load role: `RayLink`, an `EngineLink` to an engine process on a
load node, and `ClusterEngine`, the `Engine` whose targets may be the cluster's nodes.

`Engine` (engine/client.py) talks to its processes through links only, so a remote
engine is nothing but another link: its reports come back as the same channel messages
and are merged by the same code (engine/aggregate.py) as on one machine — histograms
exactly, counts and waiting gauges summed. There is no second merge here.

    engine = ClusterEngine(settings, links=RayLinks(slots, EngineHostActor, 30.0),
                           members={...node addresses...}, per_target=True, procs=2)

Traffic per engine process: the driver's commands (a report request every 250 ms, plus
whatever the user changes) as one batched call per event-loop turn, and one long-poll
call that returns the lines that came since the last (usually one report).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

import msgspec

from stackrace.base.netguard import RemoteTargetError, require_loopback_or_member
from stackrace.cluster.errors import ClusterError
from stackrace.cluster.hostinfo import HostInfo, check_compatible
from stackrace.cluster.nodes import LoadSlot
from stackrace.engine.channel import Command, Message, command_encoder, message_decoder
from stackrace.engine.client import Engine, EngineError
from stackrace.engine.link import EngineLink, LinkError
from stackrace.engine.model import EngineSettings, TargetSpec
from stackrace.engine.request import RequestError, parse_url

_PULL_WAIT = 1.0  # s an idle long-poll waits on the actor before it returns empty


def first_line(exc: BaseException) -> str:
    """Ray's errors carry a traceback of the remote side; the first line says what, and
    an actor's death carries its cause a few lines down (after the actor's id, pid and
    address, indented): both, at most 300 characters."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    lines = text.splitlines()
    cause = next((ln.strip() for ln in lines[1:] if ln.strip() and not ln[0].isspace()), "")
    said = f"{lines[0]} {cause}" if cause and not cause.startswith("Traceback") else lines[0]
    return said[:300]


class RayLink:
    """One engine process on a load node, through its `EngineHost` actor."""

    def __init__(
        self,
        index: int,
        slot: LoadSlot,
        actor_class: Any,
        timeout: float,
        lost_after: float | None = None,
    ) -> None:
        self.index = index
        self.lost_after = lost_after
        self.slot = slot
        self.description = f"node {slot.node.address} ({slot.node.id[:12]})"
        self.host = slot.node.address
        self._actor_class = actor_class
        self._timeout = timeout
        self._actor: Any = None
        self._alive = False
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self._seq = 0
        self.host_info: HostInfo | None = None  # the node it runs on, once open

    async def open(self) -> None:
        import ray  # lazy: only with --cluster
        from ray.util.scheduling_strategies import (
            NodeAffinitySchedulingStrategy,  # lazy: only with --cluster
        )

        node = self.slot.node
        # Hard affinity to a node id resolved a moment ago: fails at once if the node is
        # gone, never waits for it. num_cpus=0: the placement is ours, not Ray's
        # resource accounting (an engine uses a core, but Ray need not reserve one).
        actor = self._actor_class.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.id, soft=False),
            num_cpus=0,
        ).remote(node.id, self.slot.cpus, self.lost_after)
        try:
            async with asyncio.timeout(self._timeout):
                info = await asyncio.wrap_future(actor.start.remote().future())
            check_compatible(info, f"load node {node.address}", node.id)
        except TimeoutError:
            ray.kill(actor)
            raise LinkError(
                f"the engine on load node {node.describe()} was not ready within "
                f"{self._timeout:g}s (is stackrace installed there, the same version?)"
            ) from None
        except ClusterError as exc:
            ray.kill(actor)
            raise LinkError(str(exc)) from None
        except ray.exceptions.RayError as exc:
            ray.kill(actor)
            raise LinkError(
                f"the engine on load node {node.describe()} could not start: {first_line(exc)}"
            ) from None
        self._actor = actor
        self._alive = True
        self.host_info = info
        self.description = f"node {node.address} ({node.id[:12]}) pid {info.pid}"

    def send(self, cmd: Command) -> None:
        if self._actor is None or not self._alive:
            return
        self._out.append(command_encoder.encode(cmd) + b"\n")
        if not self._flush_scheduled:
            # every command of this event-loop turn goes in one call (a tick sends a
            # report request to each process; a slider move, one command to each)
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if not self._out or self._actor is None:
            return
        data, self._out = b"".join(self._out), []
        self._actor.send.remote(self._seq, data)
        self._seq += 1

    async def messages(self) -> AsyncIterator[Message | str]:
        import ray  # lazy: only with --cluster

        while self._actor is not None:
            try:
                lines, ended = await asyncio.wrap_future(
                    self._actor.pull.remote(_PULL_WAIT).future()
                )
            except ray.exceptions.RayError as exc:
                # the actor or its node died: the engine process is gone with it
                self._alive = False
                yield f"{self.description}: {first_line(exc)}"
                return
            for line in lines:
                try:
                    yield message_decoder.decode(line)
                except msgspec.DecodeError as exc:
                    yield f"unreadable message: {exc}"
            if ended:
                self._alive = False
                with contextlib.suppress(Exception):
                    why = await asyncio.wrap_future(self._actor.why_ended.remote().future())
                    if why:
                        yield f"{self.description}: {why}"
                return

    @property
    def alive(self) -> bool:
        return self._alive

    async def close(self, grace: float = 2.0) -> None:
        import ray  # lazy: only with --cluster

        actor = self._actor
        if actor is None:
            return
        self._flush()
        with contextlib.suppress(TimeoutError, ray.exceptions.RayError):
            async with asyncio.timeout(grace + 5.0):
                await asyncio.wrap_future(actor.close.remote(grace).future())
        self._alive = False
        ray.kill(actor)  # the actor process goes too, not only its engine

    def discard(self) -> None:
        """The engine's host was lost: kill the actor (Ray does it once the node is
        reachable again, or forgets it with the node), wait for nothing."""
        import ray  # lazy: only with --cluster

        actor, self._actor = self._actor, None
        self._alive = False
        if actor is not None:
            with contextlib.suppress(Exception):
                ray.kill(actor)


class RayLinks:
    """The `LinkFactory` for a cluster: engine process `index` goes to slot `index` (mod
    the number of slots), so a target's processes spread over the load nodes."""

    def __init__(
        self,
        slots: Sequence[LoadSlot],
        actor_class: Any,
        timeout: float,
        lost_after: float | None = None,
    ) -> None:
        if not slots:
            raise ClusterError("no load node: place the load role (--load-node)")
        self.slots = list(slots)
        self.actor_class = actor_class
        self.timeout = timeout
        self.lost_after = lost_after
        self.made: list[RayLink] = []  # every link handed out, for where-is-what questions

    def __call__(self, index: int, cpus: Sequence[int] | None) -> EngineLink:
        # `cpus` are the driver's cores and mean nothing on a load node: the slot's own
        # pinning (cluster.toml) applies there instead
        slot = self.slots[index % len(self.slots)]
        link = RayLink(index, slot, self.actor_class, self.timeout, self.lost_after)
        self.made.append(link)
        return link


class ClusterEngine(Engine):
    """An `Engine` whose processes run on load nodes and whose targets may be loopback or
    the cluster's own nodes, nothing else (netguard.require_loopback_or_member)."""

    def __init__(
        self,
        settings: EngineSettings | None = None,
        *,
        links: RayLinks,
        members: Iterable[str],
        procs: int = 1,
        warmup: float = 0.0,
        per_target: bool = False,
        lost_after: float | None = None,
    ) -> None:
        # allow_remote: the engine's own loopback check is replaced by the member check
        # below, which every target passes through first
        super().__init__(
            settings,
            procs=procs,
            warmup=warmup,
            allow_remote=True,
            per_target=per_target,
            links=links,
            lost_after=lost_after,
            start_timeout=links.timeout,
        )
        self.members = frozenset(members)
        self.links = links

    async def add_target(
        self, spec: TargetSpec, cpus: Sequence[int] | None = None, procs: int | None = None
    ) -> None:
        try:
            require_loopback_or_member(parse_url(spec.url).host, self.members)
        except (RequestError, RemoteTargetError) as exc:
            raise EngineError(str(exc)) from None
        await super().add_target(spec, None, procs)
