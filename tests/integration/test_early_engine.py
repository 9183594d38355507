"""The engine's start-up shortcuts, on real processes: `load`'s engine process, forked
from the driver once its imports are done (engine/early.py), is adopted once, and a spent
request budget is said at once (the `spent` message, engine/channel.py), so `load -n N`
need not wait for the next tick."""

from __future__ import annotations

import asyncio
import subprocess
import sys

from stackrace.engine import early
from stackrace.engine.client import Engine
from stackrace.engine.model import EngineSettings, TargetSpec
from tests.helpers import TestServer

# the fork happens in a process of its own, as `stackrace load` makes it: before any
# event loop or thread (the test process has both)
_FORKED = """
import asyncio, sys, threading
from stackrace.engine import early
from stackrace.engine.channel import Ready, message_decoder

async def main():
    child = await early.adopt()
    assert child is not None, "nothing forked"
    assert await early.adopt() is None  # once: a second link starts its own
    line = await asyncio.wait_for(child.stdout.readline(), 20)
    assert isinstance(message_decoder.decode(line), Ready)
    assert child.returncode is None
    child.stdin.close()
    print(await asyncio.wait_for(child.wait(), 20))

if sys.argv[1] == "unasked":  # start() never called: nothing is forked
    early.fork()
    print(asyncio.run(early.adopt()))
elif sys.argv[1] == "thread":  # another thread runs: no fork (the link starts its own)
    done = threading.Event()
    threading.Thread(target=done.wait).start()
    early.start()
    early.fork()
    done.set()
    print(asyncio.run(early.adopt()))
else:
    early.start()
    early.fork()
    asyncio.run(main())
"""


def _forked(case: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", _FORKED, case], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_forked_engine_is_adopted_once_and_ends_when_its_pipe_closes() -> None:
    assert _forked("adopt") == "0"  # its exit status: ended on its own, cleanly


def test_no_engine_is_forked_unless_asked_or_beside_another_thread() -> None:
    assert _forked("unasked") == "None"
    assert _forked("thread") == "None"


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
