"""The engine's start-up shortcuts, on real processes: the engine process started early
(engine/early.py) is adopted once, and a spent request budget is said at once (the
`spent` message, engine/channel.py), so `load -n N` need not wait for the next tick."""

from __future__ import annotations

import asyncio

from stackrace.engine import early
from stackrace.engine.channel import Ready, message_decoder
from stackrace.engine.client import Engine
from stackrace.engine.model import EngineSettings, TargetSpec
from tests.helpers import TestServer


async def test_the_early_engine_is_adopted_once_and_ends_when_its_pipe_closes() -> None:
    early.start()
    child = await early.adopt()
    assert child is not None
    assert await early.adopt() is None  # once: a second link starts its own
    line = await asyncio.wait_for(child.stdout.readline(), 20)
    assert isinstance(message_decoder.decode(line), Ready)
    assert child.returncode is None
    child.stdin.close()
    assert await asyncio.wait_for(child.wait(), 20) == 0


async def test_an_engine_without_an_early_one_starts_its_own(server: TestServer) -> None:
    assert await early.adopt() is None  # none was started in this process now
    async with Engine(EngineSettings(timeout=5.0)) as engine:
        await engine.add_target(TargetSpec(id="t", url=server.url("/hello"), concurrency=1))
        await asyncio.sleep(0.6)
        final = await engine.stop()
    assert final is not None and final.targets[0].total.requests > 0


async def test_a_spent_budget_ends_its_interval_at_once(server: TestServer) -> None:
    # a 30 s interval: without the engine saying the budget is spent, no snapshot would
    # come for 30 s; with it, one comes as soon as the 3 requests ended (milliseconds,
    # waited for up to 20 s on a busy machine)
    async with Engine(EngineSettings(interval=30.0, timeout=5.0)) as engine:
        await engine.add_target(
            TargetSpec(id="t", url=server.url("/hello"), concurrency=2, budget=3)
        )

        async def counted() -> int:
            async for snap in engine.snapshots():
                t = snap.target("t")
                if t is not None and t.total.attempts >= 3:
                    return t.total.attempts
            return -1

        assert await asyncio.wait_for(counted(), 20) == 3
        final = await engine.stop()
    assert final is not None
    total = final.targets[0].total
    assert total.requests == 3 and total.waiting == 0
