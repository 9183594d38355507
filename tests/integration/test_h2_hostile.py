"""The engine's HTTP/2 against servers that misbehave (tests/servers/h2_hostile.py):
every stream is still accounted (sent = answered + failed + waiting), each failure by its
kind, and the server's own count agrees with what the engine says was answered.

Held as the HTTP/1.1 ones are (test_engine_lost.py, test_accounting.py): a RST_STREAM,
a refused stream, GOAWAY with last-stream-id 0 and GOAWAY mid-run (nginx's
keepalive_requests), a zero flow-control window, a bad HPACK block, DATA after
END_STREAM; and a server that stops answering one connection, which the engine counts
per connection (`stalled_connections`: head-of-line blocking seen, not inferred).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.h2servers import HostileH2
from tests.helpers import run_cli


@pytest.fixture
def hostile(request: pytest.FixtureRequest) -> Iterator[HostileH2]:
    server = HostileH2(request.param)
    yield server
    server.kill()


def load(url: str, *args: str) -> dict[str, Any]:
    r = run_cli("load", url, "--http2", "--json", "--no-progress", *args)
    assert r.stdout, r.stderr
    out = json.loads(r.stdout)
    a = out["accounting"]
    assert a["sent"] == a["answered"] + a["failed_no_answer"] + a["waiting"], a
    return out


@pytest.mark.parametrize("hostile", ["rst"], indirect=True)
def test_rst_stream_fails_that_stream_with_its_code(hostile: HostileH2) -> None:
    total = load(hostile.url("/hello"), "-c", "2", "--streams", "4", "-n", "600")["total"]
    assert total["sent"] == 600
    resets = total["failures"].get("stream_reset", 0)
    assert set(total["failures"]) == {"stream_reset"} and resets == total["resets"]
    assert 150 <= resets <= 250, resets  # every third request
    assert total["errors"] == {"RST_STREAM INTERNAL_ERROR": resets}
    seen = hostile.counts()
    assert seen["streams"] == 600 and seen["answered"] == total["requests"], seen


@pytest.mark.parametrize("hostile", ["refuse"], indirect=True)
def test_a_refused_stream_is_counted_as_refused(hostile: HostileH2) -> None:
    total = load(hostile.url("/hello"), "-c", "2", "--streams", "4", "-n", "600")["total"]
    refused = total["failures"].get("stream_refused", 0)
    assert set(total["failures"]) == {"stream_refused"} and 150 <= refused <= 250, total
    assert total["refused"] == refused
    assert total["stalled_connections"] == 0  # refused at once: no connection waits
    assert hostile.counts()["answered"] == total["requests"]


@pytest.mark.parametrize("hostile", ["goaway0"], indirect=True)
def test_goaway_with_last_stream_0_leaves_every_stream_unprocessed(hostile: HostileH2) -> None:
    total = load(hostile.url("/hello"), "-c", "1", "--streams", "4", "-d", "1s")["total"]
    assert total["requests"] == 0 and set(total["failures"]) == {"goaway_unprocessed"}, total
    # each GOAWAY ended a connection, and the engine came back on a new one
    assert total["goaways"] >= 5 and total["refused"] == total["failures"]["goaway_unprocessed"]
    assert hostile.counts()["answered"] == 0


@pytest.mark.parametrize("hostile", ["goaway_every"], indirect=True)
def test_goaway_mid_run_reconnects_and_says_how_often(hostile: HostileH2) -> None:
    out = load(hostile.url("/hello"), "-c", "2", "--streams", "4", "-n", "1000")
    total = out["total"]
    # a connection's 50th request is its last: about 1,000 / 50 GOAWAYs
    assert 10 <= total["goaways"] <= 25, total["goaways"]
    assert set(total["failures"]) <= {"goaway_unprocessed"}, total["failures"]
    assert hostile.counts()["answered"] == total["requests"]
    r = run_cli("load", hostile.url("/hello"), "--http2", "-c", "1", "--streams", "4", "-d",
                "1s", "--no-progress")  # fmt: skip
    assert "GOAWAYs (each: a new connection)" in r.stdout, r.stdout


@pytest.mark.parametrize("hostile", ["zerowindow"], indirect=True)
def test_a_shut_window_stalls_a_request_body_until_its_timeout(hostile: HostileH2) -> None:
    # the first requests leave with the connection's preface, before the server's
    # SETTINGS shut the window; those after them wait on it, and time out as stalled
    total = load(hostile.url("/echo"), "-m", "POST", "--body", "hello", "--timeout", "1s",
                 "-c", "1", "--streams", "2", "-d", "3500ms")["total"]  # fmt: skip
    assert total["requests"] == 0
    assert total["failures"].get("flow_stall", 0) >= 1, total["failures"]
    assert set(total["failures"]) <= {"flow_stall", "timeout"}, total["failures"]


@pytest.mark.parametrize("hostile", ["badhpack"], indirect=True)
def test_a_bad_hpack_block_is_a_protocol_failure(hostile: HostileH2) -> None:
    total = load(hostile.url("/hello"), "-c", "1", "--streams", "4", "-d", "1s")["total"]
    assert total["requests"] == 0 and set(total["failures"]) == {"protocol"}, total["failures"]
    assert any("COMPRESSION_ERROR" in k for k in total["errors"]), total["errors"]


@pytest.mark.parametrize("hostile", ["data_after_end"], indirect=True)
def test_data_after_end_stream_is_no_second_answer(hostile: HostileH2) -> None:
    total = load(hostile.url("/hello"), "-c", "2", "--streams", "4", "-n", "300")["total"]
    assert total["requests"] == 300 and not total["failures"], total["failures"]
    assert hostile.counts()["answered"] == 300


@pytest.mark.parametrize("hostile", ["silent_first"], indirect=True)
def test_a_connection_whose_every_stream_waits_is_counted_as_stalled(hostile: HostileH2) -> None:
    """The first connection's 4 streams are never answered, the other two connections'
    are: at the end, one connection stalled (every open stream waited past a second),
    its 4 streams still waiting, and the rule names head-of-line blocking on it."""
    from stackrace.engine.model import WindowStats
    from stackrace.rules.head_of_line import StreamLoad, head_of_line

    out = load(hostile.url("/hello"), "-c", "3", "--streams", "4", "-d", "2500ms")
    total = out["total"]
    assert total["stalled_connections"] == 1, total
    assert total["requests"] > 100 and out["accounting"]["waiting"] >= 4, out["accounting"]
    w = WindowStats(**{k: total[k] for k in ("requests", "stalled_connections", "seconds")})
    said = head_of_line(None, w, StreamLoad("h2c", 3, 4))
    assert said is not None and said.startswith("head-of-line blocking on one TCP connection")
