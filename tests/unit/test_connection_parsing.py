"""The client protocol fed by hand through a fake transport: parsing without sockets."""

import asyncio

import pytest

from stackrace.engine.connection import BUSY, Connection
from stackrace.engine.model import BodyCheck, EngineSettings, TargetSpec
from stackrace.engine.target import Target

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Type: text/plain\r\n\r\nHello, World!"
CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5\r\nHello\r\n2\r\n, \r\n6\r\nWorld!\r\n0\r\n\r\n"
)


class FakeTransport(asyncio.Transport):
    """A transport that keeps what is written: the protocol is fed its replies by hand."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.closed = False
        self.aborted = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default


def make(check: BodyCheck | None = None) -> tuple[Target, Connection, FakeTransport]:
    # Port 9 (discard) is closed on the test machines: replacement connections are refused.
    spec = TargetSpec(id="t", url="http://127.0.0.1:9/hello", concurrency=0, check=check)
    t = Target(spec, EngineSettings(retry_delay=60), asyncio.get_running_loop())
    conn = t.conn_class(t)
    conn.fast = True
    t.conns.add(conn)
    tr = FakeTransport()
    conn.start_ns = 1
    conn.connection_made(tr)  # sends the first request
    return t, conn, tr


def latency_count(t: Target) -> int:
    return sum(t.counts)


async def test_keep_alive_response_is_counted_and_next_request_sent():
    t, conn, tr = make()
    assert tr.written == [t.request]
    conn.data_received(OK)
    assert (t.requests, t.ok, latency_count(t)) == (1, 1, 1)
    assert tr.written == [t.request, t.request]
    assert conn.state == BUSY and not tr.closed
    t.remove()


@pytest.mark.parametrize("step", [1, 3, 7, 1000])
async def test_responses_split_anywhere(step):
    t, conn, _tr = make(BodyCheck(kind="exact", arg="Hello, World!"))
    for resp in (OK, CHUNKED, OK):
        for i in range(0, len(resp), step):
            conn.data_received(resp[i : i + step])
    assert (t.requests, t.ok, t.failures) == (3, 3, {})
    assert t.bytes == 2 * len(OK) + len(CHUNKED)
    t.remove()


async def test_connection_close_closes_and_replaces():
    t, conn, tr = make()
    conn.data_received(OK.replace(b"Content-Type", b"Connection: close\r\nContent-Type"))
    assert t.ok == 1
    assert tr.closed
    assert conn not in t.conns and len(t.conns) == 1  # a fresh connection took its slot
    t.remove()


async def test_http_1_0_without_keep_alive_closes():
    t, conn, tr = make()
    conn.data_received(OK.replace(b"HTTP/1.1", b"HTTP/1.0"))
    assert t.ok == 1 and tr.closed
    t.remove()


async def test_error_status_counts_by_code():
    t, conn, _ = make()
    conn.data_received(OK.replace(b"200 OK", b"503 Busy"))
    conn.data_received(OK.replace(b"200 OK", b"404 Nope"))
    conn.data_received(OK.replace(b"200 OK", b"301 Moved"))
    assert t.failures == {"http_status": 2}
    assert t.status == {503: 1, 404: 1, 301: 1}
    assert t.ok == 1 and t.requests == 3
    t.remove()


async def test_invalid_body_is_a_failure():
    t, conn, _ = make(BodyCheck(kind="exact", arg="Hello, World!"))
    conn.data_received(OK.replace(b"Hello, World!", b"Hello, Wrld!!"))
    assert t.failures == {"invalid_body": 1} and t.ok == 0
    t.remove()


async def test_garbage_is_a_protocol_error_and_connection_is_replaced():
    t, conn, tr = make()
    conn.data_received(b"HTXP/9.9 what\r\n\r\n")
    assert t.failures == {"protocol": 1}
    assert tr.aborted and conn not in t.conns
    t.remove()


async def test_close_mid_response_is_a_reset():
    t, conn, _tr = make()
    conn.data_received(OK[:40])
    conn.connection_lost(None)
    assert t.failures == {"reset": 1}
    t.remove()


async def test_idle_close_by_server_is_not_a_failure():
    t, conn, _tr = make()
    t.pause()
    conn.data_received(OK)
    assert conn in t.idle
    conn.connection_lost(None)
    assert t.failures == {}
    t.remove()


async def test_float_range_check():
    t, conn, _ = make(BodyCheck(kind="float_range", lo=1.0, hi=10.0))
    body = b"4.500000"
    resp = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    conn.data_received(resp)
    conn.data_received(resp.replace(b"4.500000", b"45.00000"))
    conn.data_received(resp.replace(b"4.500000", b"nan!!!!!"))
    assert t.ok == 1 and t.failures == {"invalid_body": 2}
    t.remove()
