"""The C transport's response framer (engine/_frame.h) against httptools' llhttp.

The framer may only say yes to a read that llhttp parses as exactly one complete
response, with the same status, kept alive, and nothing after it: then counting the
framer's answer is counting llhttp's. Where it says no, the parser reads the bytes, so a
no is always safe; the fixed cases below hold the common servers' answers to a yes (else
the framer would be dead weight), and the mutated ones hold the implication on shapes
nobody thought to write down.
"""

from __future__ import annotations

import random

import pytest
from httptools import HttpParserError, HttpResponseParser

from stackrace.engine._cycle import frame


class _Llhttp:
    """What httptools makes of one read: the completed messages' (status, keep-alive),
    how many began, and whether it raised."""

    def __init__(self, data: bytes) -> None:
        self.begun = 0
        self.done: list[tuple[int, bool]] = []
        self.error = False
        self.parser = HttpResponseParser(self)
        try:
            self.parser.feed_data(data)
        except HttpParserError:
            self.error = True

    def on_message_begin(self) -> None:
        self.begun += 1

    def on_message_complete(self) -> None:
        self.done.append((self.parser.get_status_code(), self.parser.should_keep_alive()))


def agrees(data: bytes) -> bool:
    """A yes from the framer is llhttp's one kept-alive answer with the same status."""
    status = frame(data)
    if not status:
        return True
    seen = _Llhttp(data)
    return not seen.error and seen.begun == 1 and seen.done == [(status, True)]


# answers as the stacks send them (heads trimmed of dates that change nothing)
SERVERS = {
    "go net/http": b"HTTP/1.1 200 OK\r\nDate: Tue, 24 Nov 2026 10:00:00 GMT\r\n"
    b"Content-Length: 13\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nHello, World!",
    "gunicorn gthread": b"HTTP/1.1 200 OK\r\nServer: gunicorn\r\nDate: Tue, 24 Nov 2026 "
    b"10:00:00 GMT\r\nConnection: keep-alive\r\nContent-Type: text/html; charset=utf-8\r\n"
    b"Content-Length: 5\r\n\r\nhello",
    "uvicorn": b"HTTP/1.1 200 OK\r\ndate: Tue, 24 Nov 2026 10:00:00 GMT\r\nserver: uvicorn"
    b"\r\ncontent-length: 2\r\ncontent-type: application/json\r\n\r\n{}",
    "nginx": b"HTTP/1.1 404 Not Found\r\nServer: nginx/1.22.1\r\nContent-Type: text/html\r\n"
    b"Content-Length: 3\r\nConnection: keep-alive\r\n\r\nnop",
    "node": b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nDate: Tue, 24 Nov 2026 "
    b"10:00:00 GMT\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n"
    b"Content-Length: 2\r\n\r\nok",
    "empty reason": b"HTTP/1.1 503 \r\nContent-Length: 0\r\n\r\n",
}


@pytest.mark.parametrize("name", sorted(SERVERS))
def test_common_answers_are_framed(name: str) -> None:
    data = SERVERS[name]
    status = frame(data)
    assert status == int(data[9:12])
    assert agrees(data)


REFUSED = {
    "split: body not all here": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhell",
    "split: head not all here": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n",
    "a second response follows": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    "chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    "no length: ends with the connection": b"HTTP/1.1 200 OK\r\n\r\nok",
    "connection close": b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
    "http/1.0": b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
    "early hints": b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n",
    "no content": b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n",
    "not modified": b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n",
    "two lengths": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
    "signed length": b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok",
    "space before colon": b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok",
    "folded header": b"HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok",
    "bare LF": b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
    "control byte in a value": b"HTTP/1.1 200 OK\r\nX-A: \x00\r\nContent-Length: 2\r\n\r\nok",
    "upgrade": b"HTTP/1.1 200 OK\r\nUpgrade: h2c\r\nContent-Length: 2\r\n\r\nok",
    "status 600": b"HTTP/1.1 600 Odd\r\nContent-Length: 2\r\n\r\nok",
    "garbage": b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n",
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_anything_unusual_goes_to_the_parser(name: str) -> None:
    assert frame(REFUSED[name]) == 0


# bytes a mutation puts in: the ones that change a head's meaning
_ALPHABET = b"\r\n :\t0123456789HTPaclnoekd-/\x00\x7f\x80;,+"


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(5)
        i = rng.randrange(len(b) + 1)
        if op == 0 and b:
            b[min(i, len(b) - 1)] = rng.choice(_ALPHABET)
        elif op == 1:
            b[i:i] = bytes([rng.choice(_ALPHABET)])
        elif op == 2 and b:
            del b[min(i, len(b) - 1)]
        elif op == 3:  # a header line repeated, or one from another answer
            lines = bytes(b).split(b"\r\n")
            if len(lines) > 2:
                j = rng.randrange(1, len(lines) - 1)
                lines.insert(rng.randrange(1, len(lines)), lines[j])
                b = bytearray(b"\r\n".join(lines))
        else:  # the case of a stretch flipped
            j = min(len(b), i + rng.randint(1, 12))
            b[i:j] = bytes(b[i:j]).swapcase()
    return bytes(b)


def test_every_yes_is_llhttps_answer_on_mutated_heads() -> None:
    rng = random.Random(26)  # fixed: a failure here is the same failure on every run
    seeds = [*SERVERS.values(), *REFUSED.values()]
    framed = 0
    for _ in range(30_000):
        data = _mutate(rng, rng.choice(seeds))
        assert agrees(data), data
        framed += bool(frame(data))
    assert framed > 3_000  # the mutations left many heads framable: the yes side was tried
