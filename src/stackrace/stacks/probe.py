"""One HTTP request, fully inspected: for readiness checks and `stackrace verify`.

Not the load engine: this opens a fresh connection per request and keeps everything
(status, headers, framing, body, time) so the contract can be checked exactly.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from dataclasses import dataclass, field
from pathlib import Path

import httptools


@dataclass
class ProbeResponse:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes
    seconds: float
    chunked: bool = False
    content_length: int | None = None
    raw_headers: list[tuple[str, str]] = field(default_factory=list)

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
    requests), over TLS with `tls`; raise OSError / TimeoutError / ValueError (bad HTTP,
    or a failed handshake: ssl.SSLError is an OSError) on failure."""
    t0 = time.perf_counter()
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(host, port, ssl=tls, server_hostname=host if tls else None),
        timeout,
    )
    try:
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers)
        if body or method not in ("GET", "DELETE", "OPTIONS"):
            extra += f"Content-Length: {len(body)}\r\n"
        writer.write(
            f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: stackrace-probe\r\n"
            f"Accept: */*\r\n{extra}\r\n".encode("latin-1")
            + body
        )
        c = _Collector()
        parser = httptools.HttpResponseParser(c)
        c.parser = parser
        deadline = t0 + timeout
        while not c.done:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"no complete response to GET {path} within {timeout}s")
            data = await asyncio.wait_for(reader.read(65536), left)
            if not data:
                raise ConnectionError(
                    f"connection closed before the response to GET {path} was complete"
                )
            try:
                parser.feed_data(data)
            except httptools.HttpParserError as exc:
                raise ValueError(f"not a valid HTTP response to GET {path}: {exc}") from None
        seconds = time.perf_counter() - t0
    finally:
        writer.close()
        # wait for the close: a one-worker server (uWSGI) would otherwise keep serving a
        # connection nobody reads from until its socket timeout
        with contextlib.suppress(OSError, TimeoutError):
            await asyncio.wait_for(writer.wait_closed(), 1.0)
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
        raw_headers=c.headers,
    )


def trusting(cert: str | Path) -> ssl.SSLContext:
    """A client context that trusts exactly `cert` (a TLS stack's own certificate)."""
    ctx = ssl.create_default_context(cafile=str(cert))
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx
