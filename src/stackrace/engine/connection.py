"""One client connection: a raw asyncio.Protocol fed by httptools' response parser.

This is the engine's hot path. Per response it costs one `feed_data` (C), one
`on_message_complete` callback, one clock read, an inlined histogram increment and a
`transport.write` of prebuilt bytes. Everything that is not needed on that path (body
collection, rate scheduling, retiring) is switched on per connection, not tested per byte.

A Connection object lives for one TCP connection. When the server closes it (or asks to
with `Connection: close`), the target replaces it with a fresh object, so callbacks of a
dead transport can never touch the next one.
"""

from __future__ import annotations

import asyncio
from time import perf_counter_ns
from typing import TYPE_CHECKING

from httptools import HttpParserError, HttpResponseParser

from stackrace.engine.model import HTTP_STATUS, INVALID_BODY, PROTOCOL, RESET

if TYPE_CHECKING:
    from stackrace.engine.target import Target

# Histogram layout constants, inlined below (see histogram.index_of).
_HIGHEST = 3_600_000_000
_MASK = 2047
_MAG = 11
_HALF_MAG = 10

# Connection states
CONNECTING = 0
BUSY = 1  # a request is in flight
IDLE = 2  # open, nothing in flight (rate mode between sends, or paused)
CLOSED = 3


class Connection(asyncio.Protocol):
    __slots__ = (
        "connect_ns",
        "fast",
        "intended_ns",
        "parser",
        "retiring",
        "start_ns",
        "state",
        "target",
        "transport",
    )

    def __init__(self, target: Target) -> None:
        self.target = target
        self.transport: asyncio.Transport | None = None
        self.parser = HttpResponseParser(self)
        self.state = CONNECTING
        self.start_ns = 0  # when the request now in flight was started (connect included)
        self.intended_ns = 0  # rate mode: when it should have been sent
        self.connect_ns = 0
        self.retiring = False
        # fast: closed loop, not paused, not retiring: send the next request at once.
        self.fast = False

    # --- asyncio callbacks -------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        t = self.target
        t.open += 1
        if self.retiring or t.removed:
            self.close()
            return
        if self.start_ns:
            # A request was waiting for this connection: its clock has been running
            # since the connect started, as ab and wrk count it.
            self.state = BUSY
            transport.write(t.request)  # type: ignore[attr-defined]
        else:
            self.state = IDLE
            t.on_idle(self)

    def data_received(self, data: bytes) -> None:
        self.target.bytes += len(data)
        try:
            self.parser.feed_data(data)
        except HttpParserError:
            self.fail(PROTOCOL)

    def on_message_complete(self) -> None:
        # A whole response: all the per-request work happens here, inside the parser's
        # callback, so a response costs one Python call besides data_received. The
        # status and keep-alive flag must be read now: llhttp resets once this returns.
        now = perf_counter_ns()
        t = self.target
        parser = self.parser
        status = parser.get_status_code()
        t.requests += 1
        lat = (now - (self.intended_ns or self.start_ns)) // 1000
        if lat > _HIGHEST:
            lat = _HIGHEST
        b = (lat | _MASK).bit_length() - _MAG
        t.counts[(b << _HALF_MAG) + (lat >> b)] += 1
        if self.intended_ns:
            lat = (now - self.start_ns) // 1000
            if lat > _HIGHEST:
                lat = _HIGHEST
            b = (lat | _MASK).bit_length() - _MAG
            t.counts_unc[(b << _HALF_MAG) + (lat >> b)] += 1
            self.intended_ns = 0
        # `ok` is derived later (requests minus these failures), not counted here.
        if status >= 300:
            t.status[status] = t.status.get(status, 0) + 1
            if status >= 400:
                t.fail_count(HTTP_STATUS)
        elif t.check is not None and not t.check(self.take_body()):
            t.fail_count(INVALID_BODY)
        if not parser.should_keep_alive():
            self.state = CLOSED
            self.transport.close()  # type: ignore[union-attr]
            t.replace(self, now)
        elif self.fast:
            self.start_ns = now
            self.transport.write(t.request)  # type: ignore[union-attr]
        else:
            self.state = IDLE
            t.on_idle(self)

    def connection_lost(self, exc: Exception | None) -> None:
        t = self.target
        if self.transport is not None:
            t.open -= 1
            self.transport = None
        state = self.state
        self.state = CLOSED
        if state == BUSY:
            t.fail_count(RESET)
            t.replace(self, perf_counter_ns())
        elif state == IDLE:
            t.replace(self, 0)
        # CLOSED: we closed it ourselves and have already arranged what comes next.

    # --- used by the target -------------------------------------------------------

    def take_body(self) -> bytes:
        return b""

    def send(self, now: int, intended: int = 0) -> None:
        """Send the prebuilt request on this idle, open connection."""
        self.state = BUSY
        self.start_ns = now
        self.intended_ns = intended
        self.transport.write(self.target.request)  # type: ignore[union-attr]

    def fail(self, kind: str) -> None:
        """Count a failure for the request in flight and start over on a new connection."""
        t = self.target
        t.fail_count(kind)
        self.state = CLOSED
        if self.transport is not None:
            self.transport.abort()
        t.replace(self, perf_counter_ns())

    def close(self) -> None:
        self.state = CLOSED
        if self.transport is not None:
            self.transport.close()


class CheckedConnection(Connection):
    """A connection that keeps the body so the workload's check can read it."""

    __slots__ = ("chunks",)

    def __init__(self, target: Target) -> None:
        self.chunks: list[bytes] = []
        super().__init__(target)

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def take_body(self) -> bytes:
        body = b"".join(self.chunks)
        self.chunks.clear()
        return body
