"""One HTTP/2 request, fully inspected: readiness of a stack's h2 variant (`:http=2`,
`:http=h2c`).

The h1 probe (stackrace.stacks.probe) cannot tell that a stack speaks h2, and some h2
servers take no HTTP/1.1 at all (granian `--http 2`, nginx 1.22's cleartext `http2`
port, Node's cleartext http2 server): a stack's h2 variant is ready when it answers
over h2. Over TLS the probe offers only "h2" by ALPN and refuses a server that picks
anything else, so a ready h2 variant is one that negotiated h2; in the clear it speaks
with prior knowledge (RFC 9113 §3.3), as h2load and the engine do.

Not the load engine and not its hot path: one fresh connection per request, framed by
the `h2` library (python-hyper's sans-I/O state machine, the one Hypercorn serves with),
so this module holds no framing rule of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions

from stackrace.stacks.probe import PROBE_AGENT, ProbeResponse


def h2_context(cafile: str) -> ssl.SSLContext:
    """A client context that trusts exactly `cafile` and offers only h2 by ALPN."""
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.set_alpn_protocols(["h2"])
    return ctx


async def get(
    host: str,
    port: int,
    path: str,
    timeout: float = 5.0,
    headers: tuple[tuple[str, str], ...] = (),
    tls: ssl.SSLContext | None = None,
) -> ProbeResponse:
    """GET `path` over h2 (TLS with `tls`, else h2c with prior knowledge); raise
    OSError / TimeoutError / ValueError (a server that did not negotiate h2, a protocol
    error, a reset stream) as stackrace.stacks.probe.get does."""
    t0 = time.perf_counter()
    async with asyncio.timeout(timeout):  # not wait_for, as probe.py says why
        reader, writer = await asyncio.open_connection(
            host, port, ssl=tls, server_hostname=host if tls else None
        )
    try:
        if tls is not None:
            chosen = writer.get_extra_info("ssl_object").selected_alpn_protocol()
            if chosen != "h2":
                raise ValueError(f"the server did not negotiate h2 by ALPN (it chose {chosen})")
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        given = {k.lower() for k, _ in headers}
        scheme = "https" if tls else "http"
        own = [(":method", "GET"), (":scheme", scheme), (":path", path)]
        own.append((":authority", f"{host}:{port}"))
        if "user-agent" not in given:
            own.append(("user-agent", PROBE_AGENT))
        rest = [(k.lower(), v) for k, v in headers if k.lower() not in ("host", "connection")]
        stream = conn.get_next_available_stream_id()
        conn.send_headers(stream, own + rest, end_stream=True)
        writer.write(conn.data_to_send())
        status, got, body = 0, {}, bytearray()
        deadline = t0 + timeout
        done = False
        while not done:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"no complete h2 response to GET {path} within {timeout}s")
            async with asyncio.timeout(left):
                data = await reader.read(65536)
            if not data:
                raise ConnectionError(f"connection closed before the h2 response to GET {path}")
            try:
                events = conn.receive_data(data)
            except h2.exceptions.ProtocolError as exc:
                raise ValueError(f"not valid HTTP/2 from the server: {exc}") from None
            for ev in events:
                if isinstance(ev, h2.events.ResponseReceived) and ev.stream_id == stream:
                    for k, v in ev.headers:
                        name = k.decode("latin-1") if isinstance(k, bytes) else k
                        value = v.decode("latin-1") if isinstance(v, bytes) else v
                        if name == ":status":
                            status = int(value)
                        else:
                            got[name] = value
                elif isinstance(ev, h2.events.DataReceived) and ev.stream_id == stream:
                    body += ev.data
                    conn.acknowledge_received_data(ev.flow_controlled_length, stream)
                elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id == stream:
                    done = True
                elif isinstance(ev, h2.events.StreamReset) and ev.stream_id == stream:
                    raise ValueError(f"the server reset the h2 stream (error {ev.error_code})")
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    raise ConnectionError(f"the server sent GOAWAY (error {ev.error_code})")
            writer.write(conn.data_to_send())
        seconds = time.perf_counter() - t0
        with contextlib.suppress(Exception):
            conn.close_connection()
            writer.write(conn.data_to_send())
    finally:
        writer.close()
        with contextlib.suppress(OSError, TimeoutError):
            async with asyncio.timeout(1.0):
                await writer.wait_closed()
    cl = got.get("content-length")
    return ProbeResponse(
        status=status,
        headers=got,
        body=bytes(body),
        seconds=seconds,
        content_length=int(cl) if cl is not None and cl.strip().isdigit() else None,
    )
