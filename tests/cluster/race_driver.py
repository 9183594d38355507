"""The app's race (its `Session`, headless) as a driver on a cluster's head host.

    python tests/cluster/race_driver.py ADDRESS STACKS_FILE --stacks plain,forking -c 8
        [--lost-after 3] [--cut load] [--cut app] [--workload io]

The multi-host tests run it on the head host (the test process itself lives in the
machine's own namespace, where no Ray node is). It prints one JSON line per event:

    {"event": "loading", "hosts": [...], ...}       every pane ready, the load flowing
    {"event": "cut", "role": "load"}                then waits for a line on stdin:
                                                    the test has cut that host off
    {"event": "load-lost", "annotations": ...}      the panes said which host was lost;
                                                    waits for a line on stdin
    {"event": "drained", "stacks": {...}}           every request answered: the engine's
                                                    figures (by host) and the servers'
    {"event": "app-lost", "ended": ...}             the race ended without its app host
    {"event": "done"}

Every wait is bounded and, when it times out, prints {"event": "timeout", "phase": …}
and exits 3, so the test names the phase.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict

from stackrace.cluster.frontends import app_parts
from stackrace.cluster.load_role import ClusterEngine
from stackrace.cluster.placement import NodePlacement
from stackrace.cluster.run import ClusterRun
from stackrace.engine.model import EngineSettings
from stackrace.race.core.core import RaceCore
from stackrace.race.live.session import Session
from stackrace.race.live.view import SessionView
from stackrace.stacks.catalogue import load_stacks


def emit(event: str, **data: object) -> None:
    print(json.dumps({"event": event, **data}, default=str), flush=True)


async def until(
    session: Session, phase: str, ok: Callable[[SessionView], bool], timeout: float
) -> SessionView:
    end = time.monotonic() + timeout
    view = await session.poll()
    while time.monotonic() < end:
        view = await session.poll()
        if ok(view):
            return view
        await asyncio.sleep(0.25)
    emit("timeout", phase=phase, view=describe(view))
    sys.exit(3)


def describe(view: SessionView) -> dict[str, object]:
    return {
        "errors": view.errors[-5:],
        "ended": view.ended,
        "panes": {
            p.id: {
                "state": str(p.state),
                "connections": p.target.connections if p.target else None,
                "requests": p.target.total.requests if p.target else None,
                "annotation": p.annotation,
            }
            for p in view.panes
        },
    }


async def wait_for_go() -> None:
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)


async def main(args: argparse.Namespace) -> None:
    stacks = tuple(args.stacks.split(","))
    c = args.concurrency
    # generous: a busy 2-core machine starts actors slowly (the default is 30 s)
    placement = NodePlacement(lost_after=args.lost_after, timeout=120.0)
    run = ClusterRun.connect(args.address, placement)
    try:
        parts = app_parts(run, load_stacks(args.stacks_file))
        engine = parts.engine(EngineSettings(interval=0.25))
        assert isinstance(engine, ClusterEngine)  # its load links and per-host shares
        session = Session(RaceCore(engine, parts.source))
        from stackrace.race.core.plan import RacePlan
        from stackrace.settings.race_settings import RaceSettings

        plan = RacePlan(stacks=stacks, concurrency=c, settings=RaceSettings(workload=args.workload))
        await session.start(plan)
        await until(
            session,
            "every pane ready and loaded",
            lambda v: (
                len(v.panes) == len(stacks)
                and all(
                    p.target is not None
                    and p.target.total.requests > 100
                    and p.target.connections == c
                    and p.resources is not None
                    for p in v.panes
                )
            ),
            300,
        )
        emit(
            "loading",
            hosts=sorted({link.host for link in engine.links.made}),
            bind=run.bind_host,
            urls={m.id: m.handle.base_url for m in session.core.members.values()},
        )
        if "load" in args.cut:
            emit("cut", role="load")
            await wait_for_go()
            view = await until(
                session,
                "the panes say a load host was lost",
                lambda v: all("lost at" in p.annotation for p in v.panes),
                120,
            )
            emit(
                "load-lost", annotations={p.id: p.annotation for p in view.panes}, **describe(view)
            )
            await wait_for_go()  # the test looks at the lost host meanwhile
            before = {p.id: p.target.total.requests for p in view.panes if p.target}
            await until(
                session,
                "the survivor carries every connection",
                lambda v: all(
                    p.target is not None
                    and p.target.connections == c
                    and p.target.total.requests > before[p.id] + 100
                    for p in v.panes
                ),
                120,
            )
        await session.set_level(0)
        await asyncio.sleep(0.6)  # the surplus connections retire within 250 ms
        view = await until(
            session,
            "every request answered (drained)",
            lambda v: all(p.target is not None and p.target.total.waiting == 0 for p in v.panes),
            120,
        )
        out = {}
        for p in view.panes:
            assert p.target is not None
            base = session.core.members[p.id].handle.base_url
            with urllib.request.urlopen(base + "/_stats", timeout=10) as r:
                served = json.loads(r.read())
            out[p.id] = {
                "total": {
                    "sent": p.target.total.sent,
                    "requests": p.target.total.requests,
                    "ok": p.target.total.ok,
                    "failures": p.target.total.failures,
                    "waiting": p.target.total.waiting,
                },
                "by_host": {h: asdict(s) for h, s in engine.by_host(p.id).items()},
                "served": served,
                "rss": p.resources.rss if p.resources else 0,
            }
        emit(
            "drained",
            stacks=out,
            lost=[loss.describe() for loss in (engine.latest.lost if engine.latest else [])],
            abandoned=[loss.abandoned for loss in (engine.latest.lost if engine.latest else [])],
        )
        if "app" in args.cut:
            await session.set_level(c)
            await until(
                session,
                "the load flows again",
                lambda v: all(p.target is not None and p.target.connections == c for p in v.panes),
                120,
            )
            emit("cut", role="app")
            await wait_for_go()
            view = await until(
                session, "the race ends without its app host", lambda v: bool(v.ended), 120
            )
            emit("app-lost", **describe(view))
        await session.stop()
    finally:
        run.close()
    emit("done")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("address")
    p.add_argument("stacks_file")
    p.add_argument("--stacks", default="plain,forking")
    p.add_argument("-c", "--concurrency", type=int, default=8)
    p.add_argument("--lost-after", type=float, default=10.0)
    p.add_argument("--workload", default="hello")
    p.add_argument("--cut", action="append", default=[])
    asyncio.run(main(p.parse_args()))
