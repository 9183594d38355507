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
from collections.abc import Callable, Iterator

import pytest

from tests.helpers import CLI, TestServer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server() -> Iterator[TestServer]:
    """One test server for the module: each load resets its counters first, and each
    test checks that its own connections are closed before the next starts."""
    s = TestServer()
    yield s
    s.kill()


def load(
    url: str | list[str],
    python: bool,
    *extra: str,
    keepalive: bool = False,
    d: str = "0.5s",
    env: dict[str, str] | None = None,
) -> dict:
    """`load URL…` for `d` at c=4 on one transport: the JSON's total, with its
    per-request figures (several URLs: a mix) as `by_request`, keyed by path."""
    env = {**os.environ, "STACKRACE_PY_TRANSPORT": "1" if python else "0", **(env or {})}
    argv = [*CLI, "load", *([url] if isinstance(url, str) else url)]
    argv += [*([] if keepalive else ["--no-keepalive"]), "-c", "4", "-d", d, "--json"]
    argv += ["--no-progress", *extra]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert out.stdout, out.stderr
    doc = json.loads(out.stdout.splitlines()[0])
    total = doc["total"]
    total["by_request"] = {r["name"]: r for r in doc["requests"]}
    return total


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


# The answered shapes loaded together, as one mix (one `load` a transport instead of one
# a shape: the CLI's start costs more CPU than its half second of load). With a
# connection per request, each request is its connection's whole life, so a shape in the
# mix is read as it is alone; the per-request figures count each shape apart (/early in
# a mix once read "sent 768 = 1,534 answered + -767 failed": its 103 was counted as an
# answer; engine/mix.py). /twice stays alone: with a connection per request a mix closes
# the connection before the second response is read, so it is not counted unsolicited as
# a single path's (whose connection is recycled after the read): no answer is miscounted.
MIXED = ["/hello", "/chunked", "/status?code=503", "/http10", "/early", "/big?kb=256"]
ALONE = [s for s in SHAPES if s[0] not in MIXED]


def check_mix(
    server: TestServer,
    *extra: str,
    least: int,
    paths: list[str] = MIXED,
    d: str = "0.5s",
    each: Callable[[bool, dict], None] | None = None,
) -> dict[bool, dict]:
    """`paths` (answered shapes), a connection per request, loaded as one mix for `d` on
    each transport: every request answered (each shape more than `least` times) or still
    waiting, the 503s the only failures (`http_status`, one a 503 answered), and the
    server saw each one the engine counted, each on a connection of its own; `each`
    checks more of each transport's total. Returns each transport's total."""
    seen = {}
    for python in (False, True):
        server.reset()
        w = load([server.url(p) for p in paths], python, *extra, d=d)
        assert balanced(w) and w["requests"] == w["sent"] - w["waiting"], (python, w)
        stats = server.stats()
        assert stats["accepted"] >= w["sent"] - w["waiting"], (python, stats, w)
        by = w["by_request"]
        for path in paths:
            r = by[path]
            assert r["failed"] == 0 and r["answered"] == r["sent"] - r["waiting"], (python, r)
            assert r["answered"] > least, (python, path, r)
            code = "503" if path.startswith("/status") else "200"
            assert r["status"] == {code: r["answered"]}, (python, path, r)
            assert stats["by_path"].get(path.split("?")[0], 0) >= r["answered"], (python, path)
        n503 = sum(by[p]["answered"] for p in paths if p.startswith("/status"))
        assert w["failures"] == ({"http_status": n503} if n503 else {}), (python, w)
        if each is not None:
            each(python, w)
        seen[python] = w
    assert server.clients() == 0  # nothing left open
    return seen


def test_answered_shapes_are_counted_alike_on_both_transports(server: TestServer) -> None:
    check_mix(server, least=50)


@pytest.mark.parametrize(("path", "kinds", "answered"), ALONE, ids=[s[0] for s in ALONE])
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


# (/hello kept alive, counted alike and on four connections kept: KEPT's test below)
@pytest.mark.parametrize("path", ["/close", "/twice"])
def test_kept_alive_and_server_closed_connections_are_counted_alike(
    server: TestServer, path: str
) -> None:
    """Keep-alive asked for: /close answers `Connection: close` and closes
    (as gunicorn's sync worker: the slot is recycled), /twice sends a response nobody
    asked for after the answer."""
    seen = {}
    for python in (False, True):
        server.reset()
        # a quarter of a second: hundreds of answers kept alive even on a busy machine
        w = load(server.url(path), python, keepalive=True, d="0.25s")
        assert balanced(w), (python, w)
        seen[python] = w
        stats = server.stats()
        assert stats["by_path"].get(path, 0) >= w["requests"] > 50, (python, w)
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
        w = load(server.url(path), python, keepalive=True, d="0.25s")  # as above
        assert balanced(w), (python, w)
        assert set(w["failures"]) == kinds, (python, w["failures"])
        assert w["requests"] > 50 and w["requests"] == w["sent"] - w["waiting"], (python, w)
        stats = server.stats()
        assert stats["by_path"].get(path.split("?")[0], 0) >= w["requests"], (python, stats)
        assert stats["accepted"] == 4, (python, stats)  # the four connections, kept
    assert server.clients() == 0


def test_the_kept_loop_counted_in_c_counts_as_the_python_answer(server: TestServer) -> None:
    """A closed loop's framed 2xx answers on kept-alive plain connections are counted by
    the C transport itself (engine/_cycle.c `KeptLoop`, engine/target.py `kept`), the
    next request written there too; STACKRACE_NO_KEPT=1 sends each through
    connection.py's `answer`. Both count alike: every request sent answered or waiting,
    each answer's latency in the histogram (its median a real time), the server saw
    each one answered, the four connections kept."""
    for no_kept in ("0", "1"):
        server.reset()
        w = load(
            server.url("/hello"),
            False,
            keepalive=True,
            d="0.25s",
            env={"STACKRACE_NO_KEPT": no_kept},
        )
        assert balanced(w) and w["failures"] == {}, (no_kept, w)
        assert w["requests"] > 50 and w["requests"] == w["sent"] - w["waiting"], (no_kept, w)
        assert w["latency"]["p50"] > 0 and w["bytes"] > 50 * len("hello"), (no_kept, w)
        stats = server.stats()
        assert stats["by_path"].get("/hello", 0) >= w["requests"], (no_kept, stats, w)
        assert stats["accepted"] == 4, (no_kept, stats)
    assert server.clients() == 0
