"""HTTP/2 in the race, without a process: a level is split fairly between connections
and streams (race/core/streams.py), a pane and the header say so, an h2 member is
refused in one line while the engine has no HTTP/2, and head-of-line blocking on one
TCP connection is named from real WindowStats values (rules/head_of_line.py)."""

from __future__ import annotations

import msgspec
import pytest

from stackrace.engine.model import TargetSpec, WindowStats
from stackrace.race.core import streams
from stackrace.rules.head_of_line import StreamLoad, head_of_line, stuck_streams
from stackrace.stacks.protocols import NEEDS_ENGINE, engine_speaks_h2


@pytest.mark.parametrize(
    ("level", "per", "http", "split"),
    [
        (100, 25, "1.1", (100, 1)),  # HTTP/1.1: a connection per request in flight
        (100, 25, "2", (4, 25)),  # the example: 4 connections x 25 streams
        (100, 25, "h2c", (4, 25)),
        (100, 1, "2", (100, 1)),  # --streams 1: as many connections as HTTP/1.1
        (10, 25, "2", (1, 25)),  # fewer in flight than streams: one whole connection
        (30, 25, "2", (1, 25)),  # whole connections: the nearest, said as it is
        (0, 25, "2", (0, 25)),  # level 0: the load drained, no connection (as over 1.1)
        (0, 25, "1.1", (0, 1)),
    ],
)
def test_a_level_is_split_into_connections_and_streams(level, per, http, split):
    assert streams.split(level, per, http) == split


def test_the_same_requests_in_flight_for_h1_and_h2_where_the_level_divides():
    for level in (25, 50, 100, 250, 1000):
        assert streams.in_flight(level, 25, "2") == streams.in_flight(level, 25, "1.1") == level


def test_the_header_says_how_the_load_is_split():
    assert streams.header_line(100, 25, ["1.1", "1.1"]) == ""
    line = streams.header_line(100, 25, ["1.1", "2"])
    assert line == "h1: 100 connections · h2: 4 connections x 25 streams"
    assert streams.header_line(1, 25, ["h2c"]) == "h2: 1 connection x 25 streams"
    assert streams.header_line(1, 1, ["h2c"]) == "h2: 1 connection x 1 stream"


def test_a_pane_says_its_protocol_only_beside_h2_panes():
    assert streams.pane_words("1.1", 100, 25, None, mixed=False) == ""
    assert streams.pane_words("1.1", 100, 25, None, mixed=True) == "h1"
    assert streams.pane_words("2", 100, 25, None, mixed=True) == "h2 4×25"
    assert streams.pane_words("h2c", 100, 25, None, mixed=True) == "h2c 4×25"


def test_a_pane_reads_streams_goaways_and_resets_from_the_engines_window():
    if "streams_open" not in WindowStats.__struct_fields__:
        pytest.skip(f"WindowStats has no HTTP/2 fields yet: {NEEDS_ENGINE}")
    w = WindowStats(streams_open=97, goaways=1, resets=2, refused=3)
    words = streams.pane_words("2", 100, 25, w, mixed=True)
    assert words == "h2 4×25 · 97 streams · 1 GOAWAY · 2 RST · 3 refused"


def test_an_h2_member_is_refused_in_one_line_while_the_engine_has_no_http2():
    spec = TargetSpec(id="hypercorn:http=2", url="https://127.0.0.1:1/hello", concurrency=100)
    assert streams.with_protocol(spec, "1.1", 25) is spec
    if engine_speaks_h2():
        h2 = streams.with_protocol(spec, "2", 25)
        assert (h2.http, h2.streams, h2.concurrency) == ("2", 25, 4)
    else:
        with pytest.raises(
            RuntimeError, match="needs the engine's HTTP/2 \\(issue 51, h2engine\\)"
        ):
            streams.with_protocol(spec, "2", 25)


# --- head-of-line blocking ------------------------------------------------------------
FOUR_BY_25 = StreamLoad("2", connections=4, streams=25)


def _level(stale: int, answered: int, waiting: int = 100) -> WindowStats:
    """A level's window: `answered` answers, `waiting` in flight at its end, `stale` of
    them with no answer over the whole window."""
    return WindowStats(
        seconds=5.0, sent=answered + waiting, requests=answered, ok=answered, rps=answered / 5,
        waiting=waiting, stale=stale, in_flight=100.0, oldest_wait_us=4_800_000,
        starved_share=stale / 100, starved_wait_us=4_800_000,
    )  # fmt: skip


def _interval(starved: int) -> WindowStats:
    return WindowStats(seconds=0.25, in_flight=100.0, starved_share=starved / 100, waiting=100)


def test_one_connections_streams_all_waiting_while_others_are_answered_is_named():
    said = head_of_line(_interval(25), _level(stale=25, answered=9000), FOUR_BY_25)
    assert said is not None
    assert said.startswith("head-of-line blocking on one TCP connection: 25 streams unanswered")
    assert "(up to 4.8 s)" in said and "its other 3 connections are answered" in said


def test_two_connections_worth_are_said_as_two():
    said = head_of_line(None, _level(stale=50, answered=9000), FOUR_BY_25)
    assert said is not None and "on 2 TCP connections" in said and "other 2 connections" in said


def test_the_engines_count_of_stalled_connections_is_said_as_it_is():
    """Two connections the engine saw stalled (every stream waiting past a second) are
    two, even where the totals alone (20 stuck, under one connection's 25) say none."""
    total = msgspec.structs.replace(_level(stale=20, answered=9000), stalled_connections=2)
    said = head_of_line(None, total, FOUR_BY_25)
    assert said is not None and said.startswith("head-of-line blocking on 2 TCP connections")
    assert "its other 2 connections are answered" in said
    now = msgspec.structs.replace(_interval(0), stalled_connections=1)
    said = head_of_line(now, _level(stale=0, answered=9000), FOUR_BY_25)
    assert said is not None and said.startswith("head-of-line blocking on one TCP connection")


def test_fewer_stuck_than_one_connection_carries_is_not_head_of_line():
    """24 streams stuck on 4 x 25: no whole connection's worth; the starving rule says it."""
    assert head_of_line(_interval(24), _level(stale=24, answered=9000), FOUR_BY_25) is None


def test_http_1_1_and_one_stream_per_connection_are_never_head_of_line():
    w = _level(stale=25, answered=9000)
    assert head_of_line(None, w, StreamLoad("1.1", 100, 1)) is None
    assert head_of_line(None, w, StreamLoad("2", 100, 1)) is None


def test_one_connection_and_nothing_answered_says_it_cannot_tell_a_stopped_server():
    said = head_of_line(None, _level(stale=100, answered=0), StreamLoad("h2c", 1, 100))
    assert said is not None and "on its one TCP connection: all 100 streams wait" in said
    assert "or the server stopped" in said
    # several connections and nothing answered: a wedge, not one connection's blocking
    assert head_of_line(None, _level(stale=100, answered=0), FOUR_BY_25) is None


def test_a_stream_waiting_is_a_client_waiting():
    """The streams stuck are counted as clients are: starved now, or stale all level."""
    assert stuck_streams(_interval(30), _level(stale=20, answered=1)) == 30
    assert stuck_streams(None, _level(stale=20, answered=1)) == 20


def test_the_pane_names_head_of_line_before_starving_for_an_h2_stack():
    from stackrace.race.live.explain import annotate
    from stackrace.rules.level import STARVING, Judgment

    j = Judgment(level=100, state=STARVING, why="25 unanswered", goodput=1800.0, p99_us=0, failed=0)
    total, now = _level(stale=25, answered=9000), _interval(25)
    h2 = annotate(judgment=j, interval=now, total=total, rate=None, timeout=10.0, load=FOUR_BY_25)
    assert h2.startswith("head-of-line blocking on one TCP connection")
    h1 = annotate(
        judgment=j, interval=now, total=total, rate=None, timeout=10.0,
        load=StreamLoad("1.1", 100, 1),
    )  # fmt: skip
    assert "head-of-line" not in h1 and "clients' time unanswered" in h1


def test_the_pane_says_each_h2_failure_kind_with_the_resets_codes():
    """Every kind the engine counts has a label in the pane (tui/format.py), the h2 ones
    among them; a reset says the server's error codes as HTTP says its statuses."""
    from stackrace.engine.model import FAILURE_KINDS, H2_FAILURE_KINDS
    from stackrace.tui.format import FAILURE_LABELS
    from stackrace.tui.pane_text import failures_line

    assert set(H2_FAILURE_KINDS) <= set(FAILURE_KINDS)
    w = WindowStats(
        seconds=1.0,
        failures={"stream_reset": 7, "stream_refused": 3, "goaway_unprocessed": 2, "flow_stall": 1},
        errors={"RST_STREAM INTERNAL_ERROR": 5, "RST_STREAM CANCEL": 2},
    )
    line, rising = failures_line(w, {"stream_reset": 2}, width=0)
    text = line.plain
    assert "RST_STREAM CANCEL,INTERNAL_ERROR 7 (+2)" in text
    assert "refused stream 3" in text and "GOAWAY unprocessed 2" in text
    assert "flow stall 1" in text and rising
    assert all(FAILURE_LABELS[k] for k in H2_FAILURE_KINDS)


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("stream_reset", "the server resets streams (40/s, INTERNAL_ERROR)"),
        ("stream_refused", "refuses streams unprocessed (40/s)"),
        ("flow_stall", "40 requests/s waited on the server's flow-control window past the 10 s"),
    ],
)
def test_a_failing_h2_pane_says_what_its_streams_failed_of(kind, words):
    from stackrace.race.live.explain import annotate
    from stackrace.rules.level import FAILING, Judgment

    j = Judgment(level=100, state=FAILING, why="failures", goodput=0.0, p99_us=0, failed=400)
    total = WindowStats(
        seconds=10.0, failures={kind: 400}, errors={"RST_STREAM INTERNAL_ERROR": 400}
    )
    said = annotate(judgment=j, interval=None, total=total, rate=None, timeout=10.0)
    assert words in said


def test_a_goaway_s_unprocessed_streams_are_not_held_against_the_server():
    """RFC 9113 6.8: a stream above a GOAWAY's last-stream-id was never processed and may
    be sent again (the engine does): a connection's graceful end, as nginx's every 1,000
    requests, counted and shown but never a failure the server answers for; a reset is."""
    from stackrace.rules.accounting import no_answer_failures
    from stackrace.rules.breaking import attempts

    graceful = WindowStats(seconds=10.0, requests=1_000, failures={"goaway_unprocessed": 400})
    reset = WindowStats(seconds=10.0, requests=1_000, failures={"stream_reset": 400})
    assert no_answer_failures(graceful) == 0 and attempts(graceful) == 1_000
    assert no_answer_failures(reset) == 400 and attempts(reset) == 1_400


def test_one_rule_refuses_what_h2_cannot_honour_naming_the_option_and_the_stack():
    """h2_conflict: the rule load, bench, the app and the race core share."""
    h2 = streams.h2_speakers(["hypercorn", "hypercorn:http=2"], http2=False)
    assert h2 == ["hypercorn:http=2"]
    assert streams.h2_speakers(["hypercorn"], http2=True) == ["--http2"]
    assert streams.h2_speakers(["hypercorn", "granian-asgi"], http2=False) == []
    said = streams.h2_conflict(h2, keepalive=False, clients=None)
    assert said.startswith("--no-keepalive: hypercorn:http=2 (HTTP/2) keeps its connections")
    said = streams.h2_conflict(h2, keepalive=True, clients="slow")
    assert said.startswith("--clients:") and "hypercorn:http=2" in said
    assert streams.h2_conflict(h2, keepalive=True, clients=None) == ""
    assert streams.h2_conflict([], keepalive=False, clients="slow") == ""


def test_the_race_core_refuses_an_h2_member_the_settings_cannot_load():
    """A stack the picker adds later meets the same rule where its spec is made."""
    spec = TargetSpec(id="hypercorn:http=2", url="http://127.0.0.1:1/", concurrency=100)
    spec.keepalive = False
    with pytest.raises(RuntimeError, match=r"^--no-keepalive: HTTP/2 keeps its connections"):
        streams.with_protocol(spec, "2", 25)


@pytest.mark.parametrize(
    ("width", "head"),
    [
        (80, "h2c 4×25 · 100 streams · 3 GOAWAY · 0 RST · async · GET /hello"),
        (36, "h2c 4×25 · 100 streams · 3 GOAWAY …"),  # "…": more was left out
        (30, "h2c 4×25 · 100 open · 3 GOAWAY"),  # the GOAWAYs kept
        (24, "h2c 4×25 · 3 GOAWAY …"),  # the streams: the waiting line's figure
    ],
)
def test_an_h2_panes_head_keeps_its_protocol_and_goaways_whole(width, head):
    from stackrace.tui.pane_text import head_line

    words = "h2c 4×25 · 100 streams · 3 GOAWAY · 0 RST"
    said = head_line("async", "c=4 · 4 open", words, "GET /hello", width)
    assert not isinstance(said, str) and said.plain == head and said.cell_len <= width
    h1 = head_line("async", "c=100 · 100 open", "h1", "GET /hello", 40)
    assert h1 == "async  c=100 · 100 open · h1  GET /hello"
