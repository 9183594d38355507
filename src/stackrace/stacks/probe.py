"""One HTTP request, fully inspected: for readiness checks and `stackrace verify`.

Not the load engine: this opens a fresh connection per request and keeps everything
(status, headers, framing, body, time) so the contract can be checked exactly.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from dataclasses import dataclass
from pathlib import Path

import httptools

from stackrace.engine.framing import close_delimited
from stackrace.engine.request import build_request


@dataclass
class ProbeResponse:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes
    seconds: float
    chunked: bool = False
    content_length: int | None = None

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")


class _Collector:
    def __init__(self) -> None:
        self.headers: list[tuple[str, str]] = []
        self.body: list[bytes] = []
        self.done = False
        self.status = 0
        self.parser: httptools.HttpResponseParser | None = None

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        # read now: llhttp resets its state once this callback returns
        assert self.parser is not None
        self.status = self.parser.get_status_code()
        self.done = True


PROBE_AGENT = "stackrace-probe"  # how an app's log tells a probe from the load


async def get(
    host: str,
    port: int,
    path: str,
    timeout: float = 5.0,
    method: str = "GET",
    headers: tuple[tuple[str, str], ...] = (),
    body: bytes = b"",
    tls: ssl.SSLContext | None = None,
) -> ProbeResponse:
    """GET path (or another method, with headers and a body: `verify --app` sends your
    requests, readiness sends your headers), over TLS with `tls`; raise OSError /
    TimeoutError / ValueError (bad HTTP, a request the engine would refuse, or a failed
    handshake: ssl.SSLError is an OSError) on failure.

    The request is built by the engine's own rule (engine.request): your Host,
    User-Agent or Accept replace the probe's, and the framing headers must say what is
    sent. A body ended by the connection's close (no length, not chunked: an HTTP/1.0
    answer, uWSGI's 400) is a complete answer, as the engine reads it
    (engine.framing)."""
    t0 = time.perf_counter()
    given = {k.lower() for k, _ in headers}
    own = [("Host", f"{host}:{port}")] if "host" not in given else []
    if "user-agent" not in given:
        own.append(("User-Agent", PROBE_AGENT))
    scheme = "https" if tls else "http"
    where = f"[{host}]" if ":" in host else host
    request = build_request(f"{scheme}://{where}:{port}{path}", method, [*own, *headers], body)
    # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancel that lands as
    # the call completes, and a Ctrl-C during a stack's start then waited out the whole
    # ready_timeout (tests/hardening/test_launch_faults.py, on a busy machine)
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection(
            host, port, ssl=tls, server_hostname=host if tls else None
        )
    try:
        writer.write(request)
        c = _Collector()
        parser = httptools.HttpResponseParser(c)
        c.parser = parser
        head = b""  # the response's first bytes, up to its headers' end
        deadline = t0 + timeout
        while not c.done:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"no complete response to {method} {path} within {timeout}s")
            async with asyncio.timeout(left):
                data = await reader.read(65536)
            if not data:
                if close_delimited(head):
                    c.status = parser.get_status_code()
                    break  # the body ends where the connection does
                raise ConnectionError(
                    f"connection closed before the response to {method} {path} was complete"
                )
            if b"\r\n\r\n" not in head:
                head = (head + data)[:65536]
            try:
                parser.feed_data(data)
            except httptools.HttpParserError as exc:
                raise ValueError(f"not a valid HTTP response to {method} {path}: {exc}") from None
        seconds = time.perf_counter() - t0
    finally:
        writer.close()
        # wait for the close: a one-worker server (uWSGI) would otherwise keep serving a
        # connection nobody reads from until its socket timeout
        with contextlib.suppress(OSError, TimeoutError):
            async with asyncio.timeout(1.0):
                await writer.wait_closed()
    by_name = {k.lower(): v for k, v in c.headers}
    te = by_name.get("transfer-encoding", "").lower()
    cl = by_name.get("content-length")
    return ProbeResponse(
        status=c.status,
        headers=by_name,
        body=b"".join(c.body),
        seconds=seconds,
        chunked="chunked" in te,
        content_length=int(cl) if cl is not None and cl.strip().isdigit() else None,
    )


def trusting(cert: str | Path) -> ssl.SSLContext:
    """A client context that trusts exactly `cert` (a TLS stack's own certificate)."""
    ctx = ssl.create_default_context(cafile=str(cert))
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx
