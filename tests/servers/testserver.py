"""A small real HTTP/1.1 server for the engine's tests, run as its own process.

    python tests/servers/testserver.py PORT [BLOCK_MS] [--host ADDR] [--stats-file PATH]
                                       [--tls CERT,KEY] [--tls-max 1.2|1.3]

--host: the address to listen on (default 127.0.0.1: a cluster's app host passes its
own); --stats-file: where to write the /_stats figures when SIGTERM stops it (a stack
that the test cannot ask any more once stopped still tells its count); --tls: serve
HTTPS with this certificate and key (every path the same, each response written as
over plain TCP: asyncio's TLS sends close_notify before closing), --tls-max: the highest
TLS version it speaks (default 1.3). BLOCK_MS (default: $TESTSERVER_BLOCK_MS, else 0):
block that many ms in every /hello, a slow stack (tests.helpers.blocking sets it for a
run, so the test stacks file's `plain` is slow without a file of its own).

Paths (query parameters in brackets):
  /hello                  200, Content-Length body "Hello, World!"
  /json, /io[?ms=N]       the stackrace app contract (see stackrace.settings.workloads)
  /delay[?ms=N]           the same after N ms (default 20)
  /chunked                200, chunked body "Hello, World!" in three chunks
  /close                  200 with "Connection: close", then closes
  /status[?code=N]        status N (default 503) with a short body
  /garbage                a response line that is not HTTP
  /midbody                announces 100 body bytes, sends 10, closes
  /echo                   200, the request body echoed (POST)
  /headers                200, the request's header block echoed
  /alternate              a 302 with a body, then a 200 "Hello, World!", in turn per connection
  /http10                 an HTTP/1.0 response with no length: the body ends at the close
  /twice                  two complete 200 responses in one write (the second unasked)
  /extra[?ms=N]           a 200 now and another, unasked, N ms later (default 50) on the
                          same keep-alive connection
  /early                  "Hello, World!" in a 103 Early Hints response first, then the 200
  /big[?kb=N]             200 with an N KiB body (default 64)
Control (not counted): /_stats -> {"requests", "open", "max_open", "accepted", "by_path",
"by_peer"} (by_peer: requests per client address, which host sent them);
/_reset;
/_stall[?ms=N] blocks the whole server for N ms (as a GC pause would) before answering.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import ssl
import sys
import time
from typing import cast
from urllib.parse import parse_qs, urlsplit

STATS = {"requests": 0, "open": 0, "max_open": 0, "accepted": 0}
# block this many ms in every /hello (a slow stack): the second argument, or the variable
BLOCK_S = float(os.environ.get("TESTSERVER_BLOCK_MS", "0")) / 1000
BY_PATH: dict[str, int] = {}
BY_PEER: dict[str, int] = {}


def response(status: int, body: bytes, extra: str = "", ctype: str = "text/plain") -> bytes:
    head = (
        f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
        f"{extra}\r\n"
    )
    return head.encode() + body


class Handler(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream server's: it writes
        self.buf = b""
        self.served = 0
        peer = transport.get_extra_info("peername")
        self.peer = str(peer[0]) if peer else "?"
        self.control = False  # a connection of the test's own (/_stats …): not counted
        STATS["open"] += 1
        STATS["accepted"] += 1
        STATS["max_open"] = max(STATS["max_open"], STATS["open"])

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.control:
            STATS["open"] -= 1

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                k, _, v = line.partition(":")
                if k.strip().lower() == "content-length":
                    length = int(v)
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4 : end + 4 + length]
            self.buf = self.buf[end + 4 + length :]
            self.handle(head, body)

    def handle(self, head: str, body: bytes) -> None:
        target = head.split(" ", 2)[1]
        url = urlsplit(target)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        path = url.path
        w = self.transport.write
        if path.startswith("/_"):
            if not self.control:
                # the connection asking is not one of the load's. Counted out here, not
                # by subtracting one in /_stats: a closed poll's connection_lost can
                # come after the next poll's accept, and the load's count read high
                self.control = True
                STATS["open"] -= 1
                STATS["accepted"] -= 1
            if path == "/_stats":
                now = {**STATS, "by_path": BY_PATH, "by_peer": BY_PEER}
                w(response(200, json.dumps(now).encode()))
            elif path == "/_reset":
                STATS["requests"] = 0
                STATS["accepted"] = 0
                STATS["max_open"] = STATS["open"]
                BY_PATH.clear()
                BY_PEER.clear()
                w(response(200, b"reset"))
            elif path == "/_stall":
                time.sleep(int(q.get("ms", "1000")) / 1000)
                w(response(200, b"stalled"))
            return
        STATS["requests"] += 1
        BY_PATH[path] = BY_PATH.get(path, 0) + 1
        BY_PEER[self.peer] = BY_PEER.get(self.peer, 0) + 1
        if path == "/hello":
            if BLOCK_S:
                time.sleep(BLOCK_S)
            w(response(200, b"Hello, World!"))
        elif path == "/json":
            w(response(200, b'{"message": "Hello, World!"}', ctype="application/json"))
        elif path == "/io":
            ms = int(q.get("ms", "10"))
            asyncio.get_running_loop().call_later(ms / 1000, self.late_reply, b"ok")
        elif path == "/delay":
            ms = int(q.get("ms", "20"))
            asyncio.get_running_loop().call_later(ms / 1000, self.late_reply)
        elif path == "/chunked":
            w(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n")
            w(b"5\r\nHello\r\n2\r\n, \r\n6\r\nWorld!\r\n0\r\n\r\n")
        elif path == "/close":
            w(response(200, b"Hello, World!", "Connection: close\r\n"))
            self.transport.close()
        elif path == "/status":
            code = int(q.get("code", "503"))
            w(response(code, b"nope"))
        elif path == "/garbage":
            w(b"HTXP/9.9 what\r\n\r\n")
        elif path == "/midbody":
            w(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
            self.transport.close()
        elif path == "/echo":
            w(response(200, body))
        elif path == "/headers":
            w(response(200, head.encode()))
        elif path == "/alternate":
            self.served += 1
            if self.served % 2:
                w(response(302, b"moved, see elsewhere", "Location: /hello\r\n"))
            else:
                w(response(200, b"Hello, World!"))
        elif path == "/twice":
            w(response(200, b"Hello, World!") + response(200, b"Hello, World!"))
        elif path == "/extra":
            w(response(200, b"Hello, World!"))
            ms = int(q.get("ms", "50"))
            asyncio.get_running_loop().call_later(ms / 1000, self.late_reply, b"unasked")
        elif path == "/big":
            w(response(200, b"x" * (1024 * int(q.get("kb", "64")))))
        elif path == "/early":
            w(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
            w(response(200, b"Hello, World!"))
        elif path == "/http10":
            w(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nHello, World!")
            self.transport.close()
        else:
            w(response(404, b"not found"))

    def late_reply(self, body: bytes = b"Hello, World!") -> None:
        if not self.transport.is_closing():
            self.transport.write(response(200, body))


async def main(
    port: int, host: str = "127.0.0.1", stats_file: str = "", tls: ssl.SSLContext | None = None
) -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Handler, host, port, backlog=4096, ssl=tls)
    if stats_file:

        def write_and_exit() -> None:
            with open(stats_file, "w") as f:
                json.dump({**STATS, "by_path": BY_PATH, "by_peer": BY_PEER}, f)
            sys.exit(0)

        loop.add_signal_handler(signal.SIGTERM, write_and_exit)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def tls_context(files: str, highest: str) -> ssl.SSLContext | None:
    """The server's TLS context for `--tls CERT,KEY` (None without), up to `highest`."""
    if not files:
        return None
    cert, key = files.split(",")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.maximum_version = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}[highest]
    return ctx


def option(args: list[str], name: str, default: str) -> str:
    """The value after `name` in args (removed from them), or the default."""
    if name not in args:
        return default
    i = args.index(name)
    value = args[i + 1]
    del args[i : i + 2]
    return value


if __name__ == "__main__":
    argv = sys.argv[1:]
    host = option(argv, "--host", "127.0.0.1")
    stats_file = option(argv, "--stats-file", "")
    tls = tls_context(option(argv, "--tls", ""), option(argv, "--tls-max", "1.3"))
    if len(argv) > 1:
        BLOCK_S = float(argv[1]) / 1000
    asyncio.run(main(int(argv[0]), host, stats_file, tls))
