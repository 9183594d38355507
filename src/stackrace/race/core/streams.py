"""How a race's load is split between connections and HTTP/2 streams, fairly.

A race's level (the slider, a ramp, bench's levels) is the requests each stack has in
flight. An HTTP/1.1 stack carries them on as many connections; a stack's h2 variant
(`hypercorn:http=2`, stackrace.stacks.protocols) carries them as streams, `--streams`
per connection (h2load's -m, oha's -p), on level / streams connections. So `+` and `-`
move the same total for every pane, and `hypercorn,hypercorn:http=2` compares 100
connections with 4 connections × 25 streams, not 100 with 2,500. Streams per connection
stay what `--streams` says (as h2load's -m): the level moves connections, and the
split the header shows is the one loaded, rounded to whole connections (level 30 at
25 streams is 1 connection × 25, and so is level 10: said as it is, never as 30 or 10).

What the engine speaks comes from the stack (`MemberHandle.http`) into
`TargetSpec.http` ("1.1" or "2": the URL's scheme says TLS or h2c) and
`TargetSpec.streams`. An engine without HTTP/2 (`engine_speaks_h2()`,
stacks.protocols) refuses an h2 member in one line rather than load it over HTTP/1.1
under an h2 label; so do settings h2 cannot honour (`h2_conflict`: --no-keepalive,
--clients), the one rule `load`, `bench` and the app check before anything starts.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from stackrace.engine.model import TargetSpec
from stackrace.stacks.protocols import NEEDS_ENGINE, engine_speaks_h2, named_http

H1 = "1.1"
H2_WORD = "HTTP/2"


def is_h2(http: str) -> bool:
    """Whether a stack's `http` ("1.1", "2", "h2c") is loaded over HTTP/2."""
    return http != H1


def split(level: int, streams: int, http: str) -> tuple[int, int]:
    """(connections, streams per connection) that carry `level` requests in flight:
    `level` connections of one request each over HTTP/1.1; over h2, `streams` per
    connection on the nearest whole number of connections, at least one. Streams per
    connection never follow the level: the engine is given them once, when the target
    is added (the agreed TargetSpec.streams has no live command), so a level below
    `streams` is one connection of `streams`, and the pane and the header say so. Level
    0 is no connection at all: the load drained (a paused race, a drain before a count)."""
    level = int(level)
    if level <= 0:
        return 0, max(1, streams) if is_h2(http) else 1
    if not is_h2(http) or streams <= 1:
        return level, 1
    return max(1, round(level / streams)), streams


def in_flight(level: int, streams: int, http: str) -> int:
    """The requests in flight the split carries (connections × streams)."""
    conns, per = split(level, streams, http)
    return conns * per


def h2_speakers(names: Sequence[str], http2: bool) -> list[str]:
    """What a race loads over HTTP/2: ["--http2"] when the option says every target,
    else the stacks whose variant does (`hypercorn:http=2`)."""
    if http2:
        return ["--http2"]
    return [n for n in names if is_h2(named_http(n))]


def h2_conflict(speakers: Sequence[str], keepalive: bool, clients: object | None) -> str:
    """Why these settings cannot load `speakers` (h2_speakers) over HTTP/2, in one line
    naming the option and the stack, or "". The one rule for `load`, `bench`, the app
    (before anything starts) and the race core (a stack the picker adds): over h2 a
    connection carries every stream, so closing it after each answer would measure a
    new connection per stream, and slow clients (--clients) pace an HTTP/1.1 request's
    bytes, which the engine's h2 framing does not; loading either as if it had been
    honoured would label HTTP/1.1-like figures h2."""
    if not speakers:
        return ""
    first = speakers[0]
    # the option, or the protocol (the race core, whose refusal its stack's name heads)
    who = first if first in ("--http2", H2_WORD) else f"{first} (HTTP/2)"
    if not keepalive:
        return (
            f"--no-keepalive: {who} keeps its connections, every stream rides on one "
            "(drop --no-keepalive)"
        )
    if clients is not None:
        return f"--clients: slow clients speak HTTP/1.1 only, not {who} (drop --clients)"
    return ""


def with_protocol(spec: TargetSpec, http: str, streams: int) -> TargetSpec:
    """`spec` speaking the stack's protocol: for h2, TargetSpec.http = "2" and its
    streams per connection, its connections the level's share (`split`). Raises
    RuntimeError (NEEDS_ENGINE) when the engine cannot speak h2, or when the spec's
    keep-alive or slow clients cannot be honoured over it (`h2_conflict`)."""
    if not is_h2(http):
        return spec
    if not engine_speaks_h2():
        raise RuntimeError(NEEDS_ENGINE)
    conflict = h2_conflict([H2_WORD], spec.keepalive, spec.clients)
    if conflict:
        raise RuntimeError(conflict)
    conns, per = split(spec.concurrency, streams, http)
    return msgspec.structs.replace(spec, http="2", streams=per, concurrency=conns)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def split_words(level: int, streams: int, http: str) -> str:
    """`100 connections` or `4 connections x 25 streams`: one pane's share of a level."""
    conns, per = split(level, streams, http)
    if not is_h2(http):
        return _plural(conns, "connection")
    return f"{_plural(conns, 'connection')} x {_plural(per, 'stream')}"


def header_line(level: int, streams: int, https: list[str]) -> str:
    """How the header says the load is split, one part per protocol raced: "h1: 100
    connections · h2: 4 connections x 25 streams" ("" when every stack is HTTP/1.1:
    the level says it all)."""
    if not any(is_h2(h) for h in https):
        return ""
    parts = []
    if any(not is_h2(h) for h in https):
        parts.append(f"h1: {split_words(level, streams, H1)}")
    parts.append(f"h2: {split_words(level, streams, '2')}")
    return " · ".join(parts)


def h2_counts(w: object) -> tuple[int, int, int, int]:
    """(streams open, GOAWAYs, resets, refused) of an engine window (WindowStats' HTTP/2
    fields; read by name, 0 for a window recorded before they were)."""
    return (
        int(getattr(w, "streams_open", 0)),
        int(getattr(w, "goaways", 0)),
        int(getattr(w, "resets", 0)),
        int(getattr(w, "refused", 0)),
    )


def pane_words(http: str, level: int, streams: int, window: object | None, mixed: bool) -> str:
    """What a pane's head says of its protocol: "h2 4×25 · 97 streams · 0 GOAWAY · 0 RST"
    (connections × streams per connection, the streams open at the window's end, the
    GOAWAYs and RST_STREAMs received in it: the level's window, in the app); "h1"
    beside h2 panes (`mixed`), else "":
    a race of HTTP/1.1 stacks alone reads as it always did."""
    if not is_h2(http):
        return "h1" if mixed else ""
    conns, per = split(level, streams, http)
    words = f"{'h2c' if http == 'h2c' else 'h2'} {conns:,}×{per:,}"
    if window is not None:
        open_, goaways, resets, refused = h2_counts(window)
        words += f" · {open_:,} streams · {goaways:,} GOAWAY · {resets:,} RST"
        if refused:
            words += f" · {refused:,} refused"
    return words
