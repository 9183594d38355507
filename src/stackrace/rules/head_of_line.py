"""Head-of-line blocking on one TCP connection: the sentence an h2 pane says when one
connection's streams all wait.

Over HTTP/2 a stream is a client: `--streams 25` on 4 connections is 100 clients, and
the engine counts each stream as a request in flight, waiting, stale or starved exactly
as it counts an HTTP/1.1 connection's request (issue 51's engine: sent = answered +
failed + waiting, per stream). So every rule of stackrace.rules.level holds unchanged —
a stream waiting is a client waiting — and what HTTP/2 adds is where they wait: the
streams of one connection share its TCP byte stream and its flow-control window, so a
lost segment, a full window or a server that stops reading that connection holds every
stream on it at once, while the other connections are answered. That is head-of-line
blocking on the TCP connection, and it has its own name because its fix is its own
(more connections, fewer streams on each; or a server that reads every connection),
unlike a worker's queue.

The engine sees it per connection: `WindowStats.stalled_connections` counts the
connections whose every open stream (two or more) has waited past `STALLED_US` (a
second), from each stream's own connection (engine/target.py), so the sentence names
that many. Where the gauge says none (a window from an engine without it, or streams
that stall on several connections without emptying any one), the sign is inferred
from the totals: whole connections' worth of streams left unanswered, at least
`streams` (one connection's) starved in the last interval (`starved_share ×
in_flight`) or stale over the level while others were answered. With one connection,
or nothing answered, a blocked connection and a stopped server look alike from the
client: the sentence says so rather than guess.

Pure: no I/O. The app's explanations (race/live/explain.py) use it before the starving
sentence of stackrace.rules.starving.
"""

from __future__ import annotations

from dataclasses import dataclass

from stackrace.engine.model import WindowStats
from stackrace.rules.level import secs


@dataclass(frozen=True)
class StreamLoad:
    """How a pane's level is carried: its protocol, its connections and the streams
    per connection (race/core/streams.py `split`)."""

    http: str  # "1.1", "2", "h2c"
    connections: int
    streams: int  # per connection

    @property
    def h2(self) -> bool:
        return self.http != "1.1"


def stuck_streams(w: WindowStats | None, total: WindowStats) -> int:
    """Streams that got no answer: starved in the last interval (waiting far past what
    the level's answers took while others were answered), or stale over the level."""
    starved_now = round(w.starved_share * w.in_flight) if w is not None else 0
    return max(starved_now, total.stale)


def head_of_line(w: WindowStats | None, total: WindowStats, load: StreamLoad) -> str | None:
    """The sentence naming head-of-line blocking on a TCP connection, or None: not h2,
    one stream per connection (then it is HTTP/1.1's starving), or fewer streams stuck
    than one connection carries."""
    if not load.h2 or load.streams < 2:
        return None
    stuck = stuck_streams(w, total)
    # the engine's count of connections whose every stream waits, else the inference
    seen = max(w.stalled_connections if w is not None else 0, total.stalled_connections)
    if seen:  # (each such connection holds two streams or more)
        stuck = max(stuck, seen * 2)
    elif stuck < load.streams:
        return None
    oldest = secs(max(total.starved_wait_us, total.oldest_wait_us))
    blocked = min(load.connections, seen or stuck // load.streams)
    if total.requests > 0 and load.connections > blocked:
        where = "one TCP connection" if blocked == 1 else f"{blocked:,} TCP connections"
        others = load.connections - blocked
        return (
            f"head-of-line blocking on {where}: {stuck:,} streams unanswered (up to "
            f"{oldest}), {load.streams:,} to a connection, while its other {others:,} "
            f"connection{'s are' if others != 1 else ' is'} answered"
        )
    if load.connections == 1:
        return (
            f"head-of-line blocking on its one TCP connection: all {load.streams:,} streams "
            f"wait (up to {oldest}) — or the server stopped: one connection cannot tell"
        )
    return None
