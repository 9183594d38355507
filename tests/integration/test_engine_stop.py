"""What a stop counts: every reply a process had given when the driver stopped is merged.

A stop that lands while the driver's ticker is waiting for the processes' replies must not
drop the replies already taken from the processes that answered first. Over a cluster
link the replies take tens of ms, so the ticker waits most of the time; `load --cluster`
counted ~20 % fewer requests sent than the server saw until the ticker was ended between
ticks instead of cancelled inside one (engine/client.py Engine.stop)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence

import pytest

from stackrace.engine.channel import Message
from stackrace.engine.client import Engine
from stackrace.engine.link import LocalLink
from stackrace.engine.model import EngineSettings, TargetSpec
from tests.helpers import TestServer

pytestmark = pytest.mark.slow

LATE = 0.15  # s the second process's lines take, as over a relay (interval: 0.25 s)


class _SlowRelay(LocalLink):
    """A real engine process whose lines reach the driver `LATE` s after it wrote them
    (engine 1 only), as a cluster's relay delivers them."""

    async def messages(self) -> AsyncIterator[Message | str]:
        async for msg in super().messages():
            if self.index == 1:
                await asyncio.sleep(LATE)
            yield msg


def slow_relay(index: int, cpus: Sequence[int] | None) -> LocalLink:
    return _SlowRelay(index, cpus)


async def _next_snapshot(engine: Engine, timeout: float = 10.0) -> None:
    seq = engine.latest.seq if engine.latest is not None else 0
    end = time.monotonic() + timeout
    while engine.latest is None or engine.latest.seq == seq:
        assert time.monotonic() < end, "no snapshot"
        await asyncio.sleep(0.005)


async def test_a_stop_inside_a_tick_keeps_the_replies_already_in(server: TestServer):
    url = server.url("/hello")
    for _ in range(3):
        server.reset()
        engine = Engine(EngineSettings(), procs=2, links=slow_relay)
        async with engine:
            await engine.add_target(TargetSpec(id="t", url=url, concurrency=4))
            for _ in range(3):
                await _next_snapshot(engine)
            # a tick was published ~LATE after it began; the next begins 0.25 s after it:
            # stop inside its gather, when engine 0 has answered and engine 1 has not
            await asyncio.sleep(0.25 - LATE + LATE / 2)
            final = await engine.stop()
        assert final is not None and final.lost == []
        total = final.targets[0].total
        served = server.stats()["by_path"]["/hello"]
        assert total.sent == total.requests + total.lost + total.waiting, total
        # what was on the wire at the stop (at most one request per connection) may
        # have reached the server or not; a dropped reply is a quarter second of load
        assert served - 4 <= total.sent <= served, (total.sent, served)
