"""Slow clients in the engine against the test server: the upload and the paced read are
in each slow request's latency, a stated share of the connections is slow, and every
request is still accounted for."""

from __future__ import annotations

import asyncio

from stackrace.engine.client import Engine
from stackrace.engine.model import TargetSpec, WindowStats
from stackrace.engine.slow_clients import parse_profile
from tests.helpers import TestServer


async def run(server: TestServer, path: str, profile: str, share: float, conns: int) -> WindowStats:
    async with Engine() as engine:
        await engine.add_target(
            TargetSpec(
                id="t",
                url=server.url(path),
                concurrency=conns,
                clients=parse_profile(profile),
                slow_share=share,
            )
        )
        await asyncio.sleep(1.5)
        final = await engine.stop()
    assert final is not None
    w = final.targets[0].total
    assert w.sent == w.requests + w.lost + w.waiting
    return w


async def test_a_slow_upload_is_in_every_slow_request(server: TestServer):
    w = await run(server, "/hello", "slow:upload=100ms", 1.0, 2)
    assert w.failures == {}
    # each request takes its upload: ~2 clients × 1.5 s / 0.1 s
    assert 16 <= w.requests <= 32, w.requests
    assert w.latency.min >= 95_000, w.latency


async def test_a_share_of_the_connections_is_slow(server: TestServer):
    w = await run(server, "/hello", "slow:upload=100ms", 0.25, 4)
    # three fast connections run at full speed, one slow: the median is a fast request
    assert w.latency.p50 < 20_000, w.latency
    assert w.latency.max >= 95_000, w.latency
    assert w.requests > 200


async def test_a_slow_reader_takes_a_large_response_at_its_rate(server: TestServer):
    # 64 KiB at 100 KB/s: ~0.65 s per response, through a 4 KiB receive buffer
    w = await run(server, "/big?kb=64", "slow:upload=0ms,read=100KB/s", 1.0, 2)
    assert w.failures == {}
    assert 1 <= w.requests <= 6, w.requests
    assert w.latency.min >= 450_000, w.latency
