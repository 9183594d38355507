"""The C transport (engine/_cycle.c) counts every response shape as the Python one did.

Every plain-TCP connection starts on the C transport: a connection per request is
recycled after its answer; one the server keeps alive stays while the transport frames
its answers itself (engine/_frame.h) and is handed over to the event loop's transport at
the first it does not; TLS and slow clients stay on engine/transport.py. Each test loads the
real test server with the real CLI, once on each transport (STACKRACE_PY_TRANSPORT=1:
the Python one), and checks
the same accounting: every request sent is answered, failed by the same kinds, or still
waiting; the server saw every request the engine counted as sent (each on a connection
of its own); nothing is left open."""

from __future__ import annotations

import json
import os
import socket
import subprocess

import pytest

from tests.helpers import CLI, TestServer

pytestmark = pytest.mark.slow


def load(url: str, python: bool, *extra: str, keepalive: bool = False) -> dict:
    env = {**os.environ, "STACKRACE_PY_TRANSPORT": "1" if python else "0"}
    argv = [*CLI, "load", url, *([] if keepalive else ["--no-keepalive"])]
    argv += ["-c", "4", "-d", "0.5s", "--json"]
    argv += ["--no-progress", *extra]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert out.stdout, out.stderr
    return json.loads(out.stdout.splitlines()[0])["total"]


def balanced(w: dict) -> bool:
    lost = sum(n for k, n in w["failures"].items() if k not in ("http_status", "invalid_body"))
    return w["sent"] == w["requests"] + lost + w["waiting"]


# (path, the failure kinds it must give, whether every request is answered)
SHAPES = [
    ("/hello", set(), True),
    ("/chunked", set(), True),
    ("/status?code=503", {"http_status"}, True),
    ("/http10", set(), True),  # no length: the body ends with the connection
    ("/early", set(), True),  # 103 Early Hints first, then the answer
    ("/big?kb=256", set(), True),  # many reads per answer
    # a second response nobody asked for, after the answer: counted as unsolicited, and
    # neither the answered request nor the slot's next one fails for it
    ("/twice", set(), True),
    ("/garbage", {"protocol"}, False),
    ("/midbody", {"reset"}, False),  # the server closes in the middle of the body
]


@pytest.mark.parametrize(("path", "kinds", "answered"), SHAPES, ids=[s[0] for s in SHAPES])
def test_each_response_shape_is_counted_alike_on_both_transports(
    server: TestServer, path: str, kinds: set[str], answered: bool
) -> None:
    seen = {}
    for python in (False, True):
        server.reset()
        w = load(server.url(path), python)
        assert balanced(w), (python, w)
        assert set(w["failures"]) == kinds, (python, w["failures"])
        if answered:
            assert w["requests"] > 50 and w["requests"] == w["sent"] - w["waiting"], w
        stats = server.stats()
        # every request the engine sent reached the server, each on its own connection
        assert stats["by_path"].get(path.split("?")[0], 0) >= w["requests"]
        assert stats["accepted"] >= w["sent"] - w["waiting"]
        seen[python] = w
    assert server.clients() == 0  # nothing left open
    if path == "/twice":
        assert seen[False]["unsolicited"] > 0 and seen[True]["unsolicited"] > 0


def test_a_request_that_times_out_is_replaced(server: TestServer) -> None:
    """/delay longer than the timeout: each request fails as a timeout, its connection
    is aborted and the slot starts over on a new one (the sweep, then `fail`)."""
    w = load(server.url("/delay?ms=5000"), False, "--timeout", "0.3s", "-d", "1.2s")
    assert balanced(w), w
    assert w["failures"].get("timeout", 0) >= 8, w  # 4 slots, ~3 rounds of 0.3 s
    assert w["requests"] == 0


def test_a_connect_a_full_backlog_drops_times_out_on_the_c_transport() -> None:
    """A listener that never accepts, its backlog full: the connect never completes, the
    request stays unsent (`connecting`) and the connect timeout gives the slot up; the
    C transport is cancelled, its descriptor closed."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        w = load(
            f"http://127.0.0.1:{port}/", False, "-c", "12", "-d", "3s", "--connect-timeout", "1s"
        )
    assert balanced(w), w
    assert w["requests"] == 0
    assert w["failures"].get("connect_timeout", 0) >= 10, w


def test_refused_connections_are_counted_and_retried() -> None:
    """Nothing listens: every connect is refused (settled inside connect(), reported on
    the loop's next turn), counted, and tried again after the retry delay."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: refused
        w = load(f"http://127.0.0.1:{port}/", False, "-d", "1s")
    assert balanced(w), w
    assert w["failures"].get("refused", 0) > 4, w


@pytest.mark.parametrize("path", ["/hello", "/close", "/twice"])
def test_kept_alive_and_server_closed_connections_are_counted_alike(
    server: TestServer, path: str
) -> None:
    """Keep-alive asked for: /hello keeps it (its answers framed on the C transport),
    /close answers `Connection: close` and closes
    (as gunicorn's sync worker: the slot is recycled), /twice sends a response nobody
    asked for after the answer."""
    seen = {}
    for python in (False, True):
        server.reset()
        w = load(server.url(path), python, keepalive=True)
        assert balanced(w), (python, w)
        seen[python] = w
        stats = server.stats()
        assert stats["by_path"].get(path, 0) >= w["requests"] > 50, (python, w)
        if path == "/hello":
            assert stats["accepted"] == 4, (python, stats)  # four connections, kept
        if path == "/close":
            assert w["failures"] == {} and stats["accepted"] >= w["requests"], (python, w)
    assert set(seen[False]["failures"]) == set(seen[True]["failures"]), seen
    assert server.clients() == 0


# kept alive: what the C transport frames itself (engine/_frame.h) and what it leaves to
# the parser and the loop's transport, each against the Python transport, which parses all
KEPT = [
    ("/hello", set()),  # framed, answer after answer on the C transport
    ("/status?code=503", {"http_status"}),  # framed: a failure by status, counted alike
    ("/chunked", set()),  # not framed: parsed, then handed over to the loop's transport
    ("/early", set()),  # 103 first: parsed, then handed over
    ("/big?kb=256", set()),  # many reads per answer: parsed, then handed over
]


@pytest.mark.parametrize(("path", "kinds"), KEPT, ids=[k[0] for k in KEPT])
def test_kept_alive_answers_are_counted_alike_framed_or_parsed(
    server: TestServer, path: str, kinds: set[str]
) -> None:
    for python in (False, True):
        server.reset()
        w = load(server.url(path), python, keepalive=True)
        assert balanced(w), (python, w)
        assert set(w["failures"]) == kinds, (python, w["failures"])
        assert w["requests"] > 50 and w["requests"] == w["sent"] - w["waiting"], (python, w)
        stats = server.stats()
        assert stats["by_path"].get(path.split("?")[0], 0) >= w["requests"], (python, stats)
        assert stats["accepted"] == 4, (python, stats)  # the four connections, kept
    assert server.clients() == 0
