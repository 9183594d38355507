"""A blocking one-request-at-a-time HTTP server, the shape of one gunicorn sync worker.

    python tests/e2e/servers/sync_server.py PORT

Every path answers "Hello, World!" after `?ms=N` milliseconds (default 10) of blocking
sleep, then closes the connection, as gunicorn's sync worker does. A small listen
backlog means that past a few dozen clients connections wait or fail.
"""

from __future__ import annotations

import socket
import sys
import time
from urllib.parse import parse_qs, urlsplit

BODY = b"Hello, World!"


def serve(port: int) -> None:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(16)
    print("ready", flush=True)
    while True:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
            if not data:
                continue
            target = data.split(b" ", 2)[1].decode()
            ms = int(parse_qs(urlsplit(target).query).get("ms", ["10"])[0])
            time.sleep(ms / 1000)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
            )


if __name__ == "__main__":
    serve(int(sys.argv[1]))
