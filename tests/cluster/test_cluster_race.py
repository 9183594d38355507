"""A race on a real three-node Ray cluster on this machine: the engine on the load node,
the stacks on the app node, the merged counts against the servers' own."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Callable

import psutil
import pytest

from stackrace.cluster.errors import ClusterError, PlacementError
from stackrace.cluster.placement import NodePlacement, with_flags
from stackrace.cluster.run import ClusterRun
from stackrace.engine.client import Engine, EngineError
from stackrace.engine.model import EngineSettings, EngineSnapshot, TargetSpec
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.variants import resolve
from tests.cluster.conftest import LocalCluster, needs_ray
from tests.helpers import STACKS_FIXTURE

# a busy 2-core machine starts Ray slowly: a generous ceiling (waits end when done)
pytestmark = [needs_ray, pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(900)]


def http_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


async def until(
    engine: Engine,
    what: str,
    predicate: Callable[[EngineSnapshot], bool],
    timeout: float = 60.0,
) -> None:
    """Wait for the engine's latest snapshot to satisfy predicate; fail naming `what`."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        snap = engine.latest
        if snap is not None and predicate(snap):
            return
        await asyncio.sleep(0.1)
    pytest.fail(f"phase '{what}' timed out after {timeout:g}s: {engine.latest}")


def ancestors_named(pid: int) -> list[str]:
    names = []
    proc: psutil.Process | None = psutil.Process(pid)
    while proc is not None and proc.pid > 1:
        names.append(proc.name())
        proc = proc.parent()
    return names


async def test_race_two_stacks_across_nodes(ray_cluster: LocalCluster):
    defs = load_stacks(str(STACKS_FIXTURE))
    run = ClusterRun.connect(ray_cluster.address, NodePlacement())
    try:
        assert [s.node.id for s in run.slots] == [ray_cluster.nodes["load"]]
        assert run.app_node.id == ray_cluster.nodes["app"]
        assert run.bind_host == "127.0.0.1"  # one machine: the stacks stay on loopback
        launcher = await run.launcher()
        stacks = [await launcher.start(resolve(n, defs)) for n in ("plain", "forking")]
        assert run.app_info is not None and run.app_info.node_id == ray_cluster.nodes["app"]
        for rs in stacks:
            assert rs.state == "ready"
            # started by the app host's actor process, not by this driver
            assert "ray::AppHost" in ancestors_named(rs.root_pids[0])
            urllib.request.urlopen(rs.url + "/_reset", timeout=10).read()

        engine = run.engine(EngineSettings(), per_target=True)
        async with engine:
            for rs in stacks:
                await engine.add_target(
                    TargetSpec(id=rs.name, url=rs.url + "/hello", concurrency=8)
                )
            await until(
                engine,
                "both stacks loaded",
                lambda s: all((t := s.target(rs.name)) and t.total.requests > 500 for rs in stacks),
            )
            # every engine process runs on the load node
            hosts = [link.host_info for link in engine.links.made]
            assert len(hosts) == 2
            assert {h.node_id for h in hosts if h} == {ray_cluster.nodes["load"]}
            # stop sending, let every request be answered, then the counts must agree
            await engine.set_concurrency(0)
            await until(
                engine,
                "every request answered",
                lambda s: all(
                    (t := s.target(rs.name)) and t.interval.waiting == 0 for rs in stacks
                ),
            )
            final = await engine.stop()
        assert final is not None and not engine.errors
        for rs in stacks:
            t = final.target(rs.name)
            assert t is not None
            served = http_json(rs.url + "/_stats")["by_path"].get("/hello", 0)
            assert t.total.requests > 500, t.total
            assert t.total.failures == {}
            assert t.total.waiting == 0
            # the interval reports crossed the Ray hop and were merged on the driver:
            # not one request lost or counted twice
            assert t.total.requests == served == t.total.sent == t.total.ok
            assert t.total.latency.count == served  # the merged histogram too
        await launcher.stop_all()
        # the app host's states reach the driver with its next report: wait for them
        # (a loaded machine once asserted a moment before they came)
        deadline = asyncio.get_running_loop().time() + 15.0
        while not all(rs.state == "stopped" for rs in launcher.running.values()):
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.2)
        states = {rs.name: (rs.state, rs.error) for rs in launcher.running.values()}
        assert all(st == "stopped" for st, _ in states.values()), f"phase 'stop': {states}"
        launcher.close()
    finally:
        run.close()


def test_missing_node_fails_fast(ray_cluster: LocalCluster):
    started = time.monotonic()
    with pytest.raises(PlacementError) as exc:
        ClusterRun.connect(
            ray_cluster.address, with_flags(NodePlacement(), load_nodes=["id:deadbeef"])
        )
    text = str(exc.value)
    assert "matches no live node" in text
    assert "stackrace-role=app" in text  # the live nodes are listed, with their labels
    run = ClusterRun.connect(ray_cluster.address, with_flags(NodePlacement(), app_node="rack=7"))
    try:
        with pytest.raises(PlacementError, match="the app role names rack=7"):
            run.app_host()
    finally:
        run.close()
    assert time.monotonic() - started < 60  # not Ray's endless wait for an infeasible node


def test_unreachable_head_fails_fast():
    from tests.helpers import free_port

    started = time.monotonic()
    with pytest.raises(ClusterError, match="nothing answers"):
        ClusterRun.connect(f"127.0.0.1:{free_port()}", NodePlacement())
    assert time.monotonic() - started < 20


async def test_load_only_goes_to_cluster_nodes(ray_cluster: LocalCluster):
    run = ClusterRun.connect(ray_cluster.address, NodePlacement())
    try:
        engine = run.engine(EngineSettings())
        async with engine:
            # TEST-NET-3: refused before any connection is made
            with pytest.raises(EngineError, match="neither loopback nor a node"):
                await engine.add_target(TargetSpec(id="x", url="http://203.0.113.5:80/"))
    finally:
        run.close()


async def test_app_session_on_the_cluster(ray_cluster: LocalCluster):
    """The app's session (headless) with the cluster's engine and launcher: panes fill
    with the load nodes' figures and the app node's memory and CPU."""
    from stackrace.cluster.app_role import ClusterStackSource
    from stackrace.cluster.frontends import app_parts
    from stackrace.race.core.core import RaceCore
    from stackrace.race.core.plan import RacePlan
    from stackrace.race.live.session import Session

    run = ClusterRun.connect(ray_cluster.address, NodePlacement())
    try:
        parts = app_parts(run, load_stacks(str(STACKS_FIXTURE)))
        assert isinstance(parts.source, ClusterStackSource)
        parts.source.defaults = ("plain",)
        offered = {c.id: c for c in parts.source.catalog()}
        assert offered["plain"].available and offered["plain"].default
        assert not offered["missing-binary"].available
        engine = parts.engine(EngineSettings(interval=0.25))
        session = Session(RaceCore(engine, parts.source))
        await session.start(RacePlan(stacks=("plain", "forking"), concurrency=4))
        deadline = time.monotonic() + 120  # returns once they fill; a busy machine is slow
        view = await session.poll()
        while time.monotonic() < deadline:
            view = await session.poll()
            if all(
                p.state == "ready"
                and p.target is not None
                and p.target.total.requests > 100
                and p.resources is not None
                and p.resources.rss > 0
                for p in view.panes
            ):
                break
            await asyncio.sleep(0.25)
        else:
            pytest.fail(f"the panes did not fill: {view}")
        assert len(view.panes) == 2 and not view.errors
        await session.set_level(8)  # live, on the load node's engine processes
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            view = await session.poll()
            if all(p.target is not None and p.target.connections == 8 for p in view.panes):
                break
            await asyncio.sleep(0.25)
        else:
            pytest.fail(
                f"phase 'a live concurrency change reaches the load node' timed out: {view}"
            )
        await session.stop()
    finally:
        run.close()
