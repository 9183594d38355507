"""A server that serves one request at a time, the shape of one sync worker.

    python tests/servers/one_at_a_time.py PORT [--keepalive] [--ms N]

It accepts a connection, reads one request, blocks N ms (default 10), answers, and
closes (or, with --keepalive, serves the same connection until the client closes it,
as one uWSGI worker does). Its listen backlog is large, so queued clients wait rather
than being refused. It counts every request it read and every connection it accepted,
and answers `GET /_count` with {"read", "accepted", "max_per_connection", "control"}
without the wait (a control request: counted apart, in "control").
"""

from __future__ import annotations

import json
import socket
import sys
import time

COUNTS = {"read": 0, "accepted": 0, "max_per_connection": 0, "control": 0}


def read_request(conn: socket.socket, buf: bytes) -> tuple[bytes | None, bytes]:
    while b"\r\n\r\n" not in buf:
        try:
            chunk = conn.recv(65536)
        except OSError:
            return None, b""
        if not chunk:
            return None, b""
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


def serve(port: int, keepalive: bool, ms: float) -> None:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(4096)
    print("ready", flush=True)
    while True:
        conn, _ = listener.accept()
        COUNTS["accepted"] += 1
        served = 0
        buf = b""
        with conn:
            while True:
                head, buf = read_request(conn, buf)
                if head is None:
                    break
                if head.startswith(b"GET /_count "):
                    COUNTS["control"] += 1
                    body = json.dumps(COUNTS).encode()
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
                        % (len(body), body)
                    )
                    break
                COUNTS["read"] += 1
                served += 1
                COUNTS["max_per_connection"] = max(COUNTS["max_per_connection"], served)
                time.sleep(ms / 1000)
                close = not keepalive or b"connection: close" in head.lower()
                try:
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n"
                        + (b"Connection: close\r\n" if close else b"")
                        + b"\r\nHello, World!"
                    )
                except OSError:
                    break
                if close:
                    break


if __name__ == "__main__":
    args = sys.argv[1:]
    ms = float(args[args.index("--ms") + 1]) if "--ms" in args else 10.0
    serve(int(args[0]), "--keepalive" in args, ms)
