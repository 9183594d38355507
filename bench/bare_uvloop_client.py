#!/usr/bin/env python3
"""The floor for a Python load client: the least an asyncio.Protocol on uvloop can do.

    python bench/bare_uvloop_client.py URL CONNECTIONS SECONDS [close]

Prebuilt request, one preallocated histogram, and it assumes every read is exactly one
whole response (true for small keep-alive responses; nothing is parsed or checked). It
is not a tool: engine_vs_wrk.py runs it beside the engine to show what the engine's
features (parsing, failure kinds, snapshots, control channel) cost above the floor.
With `close` it asks for `Connection: close` and opens a new connection for every
request (loop.create_connection, as the engine does): connect_rate.py's floor.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from time import perf_counter_ns
from typing import cast
from urllib.parse import urlsplit

import uvloop

COUNTS = [0] * 23552


def as_stream(transport: asyncio.BaseTransport) -> asyncio.Transport:
    """A TCP connection's transport: uvloop's has every method of asyncio.Transport but
    is not its subclass, so this is a cast, not a check."""
    return cast(asyncio.Transport, transport)


class OneShot(asyncio.Protocol):
    """One request per connection; the next connection is opened when this one ends."""

    def __init__(self, request: bytes, reopen: Callable[[], None]) -> None:
        self.request = request
        self.reopen = reopen
        self.start = perf_counter_ns()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = as_stream(transport)
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        lat = (perf_counter_ns() - self.start) // 1000
        b = (lat | 2047).bit_length() - 11
        COUNTS[(b << 10) + (lat >> b)] += 1
        self.transport.close()
        self.reopen()


class Bare(asyncio.Protocol):
    def __init__(self, request: bytes) -> None:
        self.request = request
        self.start = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = as_stream(transport)
        self.start = perf_counter_ns()
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        now = perf_counter_ns()
        lat = (now - self.start) // 1000
        b = (lat | 2047).bit_length() - 11
        COUNTS[(b << 10) + (lat >> b)] += 1
        self.start = now
        self.transport.write(self.request)


async def main(url: str, conns: int, seconds: float, close: bool = False) -> None:
    u = urlsplit(url)
    extra = "Connection: close\r\n" if close else ""
    request = f"GET {u.path or '/'} HTTP/1.1\r\nHost: {u.netloc}\r\n{extra}\r\n".encode()
    host, port = u.hostname, u.port or 80
    assert host is not None, url
    loop = asyncio.get_running_loop()
    if close:
        tasks: set[asyncio.Task[object]] = set()

        def reopen() -> None:
            t = loop.create_task(
                loop.create_connection(lambda: OneShot(request, reopen), host, port)
            )
            tasks.add(t)
            t.add_done_callback(tasks.discard)

        for _ in range(conns):
            reopen()
        await asyncio.sleep(seconds)
        for t in list(tasks):
            t.cancel()
        print(sum(COUNTS))
        return
    transports = []
    for _ in range(conns):
        tr, _ = await loop.create_connection(lambda: Bare(request), host, port)
        transports.append(tr)
    await asyncio.sleep(seconds)
    for tr in transports:
        tr.close()
    print(sum(COUNTS))


if __name__ == "__main__":
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        close = len(sys.argv) > 4 and sys.argv[4] == "close"
        runner.run(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), close))
