"""Where a response ends when the server closes the connection: the one rule, for the
engine (a connection lost mid-response) and the readiness probe (stacks/probe.py).

HTTP/1.1 frames a body by Content-Length, by chunked transfer coding, or — when it has
neither — by the connection's close (RFC 9112 §6.3): an HTTP/1.0 answer, or uWSGI's
400 with `Connection: close`, is complete when the connection ends after its headers.
llhttp learns that only from an EOF, which httptools cannot give it, so the caller asks
here with the first bytes of the response.
"""

from __future__ import annotations


def close_delimited(head: bytes) -> bool:
    """Whether a response whose first bytes are `head` ends at the connection's close."""
    end = head.find(b"\r\n\r\n")
    if end < 0:
        return False  # the headers themselves were cut: a reset
    lines = head[:end].lower().split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        return False
    status = int(parts[1])
    if status < 200 or status in (204, 304):
        return False  # these never have a body
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip()
        if name == b"content-length":
            return False
        if name == b"transfer-encoding" and b"chunked" in value:
            return False
    return True
