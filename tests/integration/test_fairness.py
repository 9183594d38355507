"""A race is fair: one stack's load does not wait behind another's in the engine.

A server that closes the connection after every response (the client reconnects for
each request, as with gunicorn's sync worker) races beside three keep-alive servers.
Its req/s in the race (one driver, per-target engine processes, as the app and bench
run) must stay close to what it gets when each server has a load process of its own at
the same time. With one engine process for all four it used to get a fraction of it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess

import pytest

from stackrace.engine.client import Engine
from stackrace.engine.model import TargetSpec
from tests.helpers import CLI, ROOT, TestServer

pytestmark = pytest.mark.slow
# 2 s a phase (was 3): the ratio is of two rates over whole seconds, so a ~100 ms stall
# moves it by ~5 %, inside the margin between the goal (0.9) and the floor (0.75); the
# cost is the 8 full-throttle loads at c=50, proportional to this
SECONDS = 2.0
CONC = 50


@pytest.fixture
def four():
    servers = [TestServer() for _ in range(4)]
    yield servers
    for s in servers:
        s.kill()


def urls(servers: list[TestServer]) -> dict[str, str]:
    out = {"close": servers[0].url("/close")}
    out.update({f"keep{i}": s.url("/hello") for i, s in enumerate(servers[1:], 1)})
    return out


def separate(targets: dict[str, str]) -> dict[str, float]:
    procs = {
        name: subprocess.Popen(
            [*CLI, "load", url, "-c", str(CONC), "-d", f"{SECONDS}s", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=ROOT,
        )
        for name, url in targets.items()
    }
    return {
        name: json.loads(p.communicate(timeout=60)[0])["total"]["rps"] for name, p in procs.items()
    }


async def race(targets: dict[str, str], per_target: bool) -> dict[str, float]:
    async with Engine(per_target=per_target) as engine:
        for name, url in targets.items():
            await engine.add_target(TargetSpec(id=name, url=url, concurrency=CONC))
        await asyncio.sleep(0.5)
        engine.reset_totals()
        await asyncio.sleep(SECONDS)
        snap = engine.latest
        assert snap is not None
    return {t.id: t.total.rps for t in snap.targets}


async def test_a_reconnecting_stack_keeps_its_rate_beside_keepalive_stacks(four):
    targets = urls(four)
    ratios = []
    for _ in range(2):  # alternate, so drift on a shared machine hits both alike
        alone = await asyncio.to_thread(separate, targets)
        raced = await race(targets, per_target=True)
        ratios.append(raced["close"] / alone["close"])
    # the goal is 0.9 (bench/fairness.py measures it pinned); on a noisy 2-core test
    # machine, unpinned, the better of two rounds must still clear 0.75 (a stall in a
    # race lowers that round's ratio; a starved-out reconnecting stack misses in both)
    assert sorted(ratios)[-1] >= 0.75, ratios
