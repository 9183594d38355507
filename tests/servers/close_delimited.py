"""A server whose every answer ends where its connection does, as uWSGI's 400 does.

    python tests/servers/close_delimited.py PORT [STATUS]

It answers every request with `HTTP/1.1 STATUS`, `Connection: close`, no Content-Length
and no chunked framing, an HTML page for a body (a Django-style "Bad Request (400)" for
a 4xx, "hello" for anything else), and closes: valid HTTP (RFC 9112 §6.3), the body
ends at the close. Each answer goes out in two writes, so a reader that takes the
first read for the whole answer is caught.
"""

from __future__ import annotations

import socket
import sys
import threading
import time

PAGE_400 = (
    b'<!doctype html>\n<html lang="en">\n<head>\n  <title>Bad Request (400)</title>\n'
    b"</head>\n<body>\n  <h1>Bad Request (400)</h1><p></p>\n</body>\n</html>\n"
)


def answer(conn: socket.socket, status: int) -> None:
    with conn:
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = conn.recv(65536)
            if not chunk:
                return
            buf += chunk
        body = PAGE_400 if status >= 400 else b"<html><body>hello</body></html>\n"
        conn.sendall(
            f"HTTP/1.1 {status} X\r\nConnection: close\r\nContent-Type: text/html\r\n\r\n".encode()
            + body[:20]
        )
        time.sleep(0.01)
        conn.sendall(body[20:])


def main(port: int, status: int) -> None:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(1024)
    print("ready", flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=answer, args=(conn, status), daemon=True).start()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 400)
