"""A server that answers every request with a body that never ends, written without pause.

    python tests/servers/flood.py PORT

Each connection gets a thread of its own: it reads the request head, writes a response
head announcing 1 TB (`Content-Length`) and then the body, for ever, with sendfile(2)
from a 16 MiB memory file: the kernel moves pages, this process copies nothing, so it
writes faster than any reader that copies what it reads (the engine copies each read
once into a Python object). What the engine's read loop must survive
(tests/integration/test_engine_flood.py): a socket that a faster writer keeps full. The
writing stops when the client goes (EPIPE, ECONNRESET) or at SIGTERM.

/_stats (a connection of its own) -> {"connections": accepted so far, "bytes": written}.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading

CHUNK = 16 * 1024 * 1024
HEAD = b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000000\r\n\r\n"  # a TB: never all sent
STATS = {"connections": 0, "bytes": 0}
_lock = threading.Lock()


def body_file() -> int:
    fd = os.memfd_create("flood")
    os.write(fd, b"x" * CHUNK)
    return fd


def serve(conn: socket.socket, body: int) -> None:
    with conn:
        head = b""
        while b"\r\n\r\n" not in head:
            data = conn.recv(65536)
            if not data:
                return
            head += data
        if head.startswith(b"GET /_stats "):
            with _lock:
                doc = json.dumps(STATS).encode()
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(doc)
                + doc
            )
            return
        with _lock:
            STATS["connections"] += 1
        written = 0
        try:
            conn.sendall(HEAD)
            while True:
                written += os.sendfile(conn.fileno(), body, 0, CHUNK)
        except OSError:
            pass  # the client went
        finally:
            with _lock:
                STATS["bytes"] += written


def main() -> None:
    port = int(sys.argv[1])
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    body = body_file()
    listener = socket.create_server(("127.0.0.1", port), backlog=128)
    print("ready", flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn, body), daemon=True).start()


if __name__ == "__main__":
    main()
