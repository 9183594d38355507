"""HTTP/2 for a target: streams as the target's slots, several on one connection.

The target (engine/target.py) drives slots: each carries one request at a time, is
counted in `sent` when it starts and ends answered, failed or still waiting. For
HTTP/1.1 a slot is a connection; here it is an `H2Stream`, a stream slot, and
`streams` of them share one `H2Link`, one TCP connection whose framing is libnghttp2's,
driven from the C transport (engine/_h2.h). So the closed loop, rate mode and its
coordinated-omission correction, budgets, pauses, retiring and the accounting are the
target's own, unchanged: what differs is only where a slot's request goes (a stream
opened on its link's connection) and how it can end.

Why slots and not one object per connection: the target's invariant (sent = answered +
failed + waiting) is kept per slot, in one place, for both protocols; a connection
object that multiplexed requests would need a second copy of the rate scheduler and
its accounting. The cost: `set_concurrency(c)` makes c × streams slots, and the pool
(`H2Pool.attach`) packs them `streams` to a link, so the server sees c connections.

A stream ends in one Python call (the C transport calls the slot's `answer` or
`stream_failed` from nghttp2's stream-close callback); a closed-loop answer returns the
slot's next request and the transport opens its stream (no second call), and every
stream a read's answers open leaves in one send() at the read's end.

How a stream can fail, each counted once, as its kind (engine/model.py):
- the server's RST_STREAM: `stream_reset` (its error code in `errors`), or
  `stream_refused` for REFUSED_STREAM (the server did not process it);
- above a GOAWAY's last-stream-id: `goaway_unprocessed` (never processed);
- ended by nghttp2 for a malformed response: `protocol`; the connection itself ended
  for a protocol error of the server's (a bad HPACK block): `protocol` for every stream
  open on it, the reason in `errors`. (A DATA frame after a stream's END_STREAM, once
  the stream is closed, nghttp2 ignores, as RFC 9113 §5.1 allows: the answer was
  counted once, and nothing else is.)
- the connection lost: `reset`; no answer within the request timeout: `timeout`, or
  `flow_stall` when its body was still held by a closed flow-control window.
A failed slot is replaced as an HTTP/1.1 connection is (Target.replace): in the closed
loop its next request starts at once, on a link with room — a new connection after a
GOAWAY, which also drains the link it came on (each GOAWAY counted: `goaways`).

A server's SETTINGS_MAX_CONCURRENT_STREAMS below `streams` is obeyed by nghttp2 (the
streams above it wait in its queue, their clocks running: a client waiting) and said:
`max_streams`, the smallest announced.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

from stackrace.engine._cycle import H2_FAULT, H2_RESET, H2_UNPROCESSED, H2Request
from stackrace.engine._cycle import Transport as CTransport
from stackrace.engine.connection import BUSY, CLOSED, CONNECTING, IDLE, Connection, KeepsBody
from stackrace.engine.model import (
    FLOW_STALL,
    GOAWAY_UNPROCESSED,
    PROTOCOL,
    RESET,
    STREAM_REFUSED,
    STREAM_RESET,
    TIMEOUT,
)
from stackrace.engine.request import build_request, check_method, parse_url

if TYPE_CHECKING:
    from stackrace.engine.target import Target

# RFC 9113 §7 error codes, by number, for the failures' reasons
ERROR_NAMES = (
    "NO_ERROR",
    "PROTOCOL_ERROR",
    "INTERNAL_ERROR",
    "FLOW_CONTROL_ERROR",
    "SETTINGS_TIMEOUT",
    "STREAM_CLOSED",
    "FRAME_SIZE_ERROR",
    "REFUSED_STREAM",
    "CANCEL",
    "COMPRESSION_ERROR",
    "CONNECT_ERROR",
    "ENHANCE_YOUR_CALM",
    "INADEQUATE_SECURITY",
    "HTTP_1_1_REQUIRED",
)
REFUSED_STREAM = 7


def error_name(code: int) -> str:
    return ERROR_NAMES[code] if 0 <= code < len(ERROR_NAMES) else f"0x{code:x}"


def build_h2_request(
    url: str, method: str, headers: list[tuple[str, str]], body: bytes
) -> H2Request:
    """One kind of request for HTTP/2: the same checks as HTTP/1.1's (build_request
    refuses what it would), then pseudo-headers from the URL; connection-specific
    headers are left out by the C side (HTTP/2 forbids them)."""
    build_request(url, method, headers, body)  # every check HTTP/1.1 makes, one place
    u = parse_url(url)
    given = {k.lower() for k, _ in headers}
    extra = [("user-agent", "stackrace")] if "user-agent" not in given else []
    if "accept" not in given:
        extra.append(("accept", "*/*"))
    return H2Request(
        check_method(method),
        "https" if u.tls else "http",
        u.host_header,
        u.target,
        [*headers, *extra],
        body or None,
    )


class H2Link:
    """One HTTP/2 connection: its C transport's protocol and opener, and its slots."""

    __slots__ = ("draining", "pool", "slots", "transport", "up")

    def __init__(self, pool: H2Pool, now: int) -> None:
        self.pool = pool
        self.slots: set[H2Stream] = set()
        self.up = False
        # a GOAWAY came (or the link is full of ids): no new stream goes on it
        self.draining = False
        t = pool.target
        self.transport: CTransport = CTransport(
            t.poller, self, self, t.family, t.addr, now, None, True, tls=t.tls_c, h2=True
        )

    # what a slot's `pending` offers the target's sweep and _waiting
    @property
    def state(self) -> int:
        return self.transport.state

    def cancel(self) -> None:
        """The connect (or handshake) timed out: this link is given up; each slot on it
        is failed by the sweep as its own connect times out."""
        self.pool.forget(self)
        self.transport.cancel()

    # --- the C transport's calls --------------------------------------------------

    def connected(self, transport: CTransport, sent: bool) -> None:
        self.transport = transport
        self.up = True
        t = self.pool.target
        t.open += 1
        for slot in list(self.slots):
            slot.link_up(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        t = self.pool.target
        if self.up:
            t.open -= 1
            self.up = False
        self.pool.forget(self)
        kind = RESET
        if isinstance(exc, ConnectionError) and str(exc).startswith("HTTP/2"):
            kind = PROTOCOL
            why = str(exc)[:160]
            t.errors[why] = t.errors.get(why, 0) + 1
        slots, self.slots = self.slots, set()
        for slot in slots:
            slot.lost(kind)

    def connect_done(self, protocol: Any, connect_ns: int, tls_ns: int, resumed: bool) -> None:
        self.pool.target.connect_done(None, connect_ns, tls_ns, resumed)  # type: ignore[arg-type]  # unused there

    def connect_failed(self, protocol: Any, err: int, tls: str | None = None) -> None:
        self.pool.forget(self)
        if tls is not None and "no application protocol" in tls:
            # the server refused ALPN's h2 with an alert (Go's does): said in h2's words
            tls = f"the server did not choose h2 by ALPN ({tls})"
        t = self.pool.target
        slots, self.slots = self.slots, set()
        for slot in slots:
            slot.link = None
            slot.pending = None
            t.connect_failed(slot, err, tls)

    def goaway(self, last_stream_id: int, code: int) -> None:
        t = self.pool.target
        t.goaways += 1
        if code:
            why = f"GOAWAY {error_name(code)}"
            t.errors[why] = t.errors.get(why, 0) + 1
        self.draining = True
        self.pool.forget(self)
        # idle slots (rate mode, paused) move to a new connection now; busy ones finish
        # here (or are failed as unprocessed by nghttp2) and move with their next request
        for slot in [s for s in self.slots if s.state == IDLE]:
            slot.move()

    def settings(self, max_streams: int) -> None:
        t = self.pool.target
        if max_streams and (not t.max_streams or max_streams < t.max_streams):
            t.max_streams = max_streams

    # --- slots --------------------------------------------------------------------

    def detach(self, slot: H2Stream) -> None:
        self.slots.discard(slot)
        slot.link = None
        if not self.slots:
            # nobody left on it (retired slots, a lowered concurrency): it closes
            self.pool.forget(self)
            if self.up:
                self.transport.close()
            else:
                self.transport.cancel()


class H2Pool:
    """A target's HTTP/2 connections: new slots go `streams` to a link."""

    __slots__ = ("links", "streams", "target")

    def __init__(self, target: Target, streams: int) -> None:
        self.target = target
        self.streams = streams
        self.links: list[H2Link] = []  # links taking new slots, newest last

    def attach(self, slot: H2Stream, now: int) -> None:
        """Put `slot` on a link with room (a new connection if none has), and start its
        request when the link is up (at once when it is)."""
        links = self.links
        link = None
        for candidate in reversed(links):
            if len(candidate.slots) < self.streams:
                link = candidate
                break
        if link is None:
            link = H2Link(self, now)
            if link.transport.state != CLOSED:
                links.append(link)
        link.slots.add(slot)
        slot.link = link
        if link.up:
            slot.link_up(link.transport)
        else:
            slot.pending = link  # type: ignore[assignment]  # the sweep's view of a connect

    def retire_order(self) -> Callable[[Connection], tuple[int, bool]]:
        """A sort key for retiring slots: those with no link (or a draining one) first,
        then by their link, the newest first (lowering the concurrency closes whole
        connections), busy ones last."""
        age = {id(link): i for i, link in enumerate(self.links)}
        gone = len(self.links)

        def key(slot: Connection) -> tuple[int, bool]:
            return (-age.get(id(getattr(slot, "link", None)), gone), slot.state == BUSY)

        return key

    def forget(self, link: H2Link) -> None:
        """`link` takes no new slot (draining, lost, given up, empty)."""
        if link in self.links:
            self.links.remove(link)


class H2Stream(Connection):
    """A stream slot: one request at a time on its link's connection (see above)."""

    __slots__ = ("keep", "link")
    # the closed loop's next request may be returned from `answer` for the C transport
    # to open at once (a mix picks each request's kind in write_request: it may not)
    returns_next = True

    def __init__(self, target: Target) -> None:
        super().__init__(target)
        self.link: H2Link | None = None
        self.keep = False  # the body is read for the workload's check (CheckedH2Stream)

    def link_up(self, transport: CTransport) -> None:
        """The link's connection is up (Connection.connected, less what a connection
        of its own does: the link counts itself open)."""
        self.transport = transport
        self.pending = None
        self.begin(transport, False)

    def write_request(self, transport: Any) -> None:
        if transport.submit(self, self.target.request, self.keep) <= 0:
            # no stream on this connection any more (a GOAWAY, out of ids, closing): the
            # request goes to another one, its clock still running
            self.move()

    def move(self) -> None:
        """Leave this link for one with room, the request in flight (if any) with it."""
        link = self.link
        if link is not None:
            link.draining = True
            link.pool.forget(link)
            link.detach(self)
        self.transport = None
        t = self.target
        if self.start_ns:
            t._connect(self)
        else:
            self.state = CLOSED
            t.on_idle(self)

    def answer(self, status: int, size: int, keep: bool) -> H2Request | None:  # type: ignore[override]  # the next request, for the C transport
        """The stream's whole response (from the C transport: one call a request), the
        accounting Connection.answer's (`count_answer`). Returns the closed
        loop's next request for the C transport to open on this slot's connection (one
        Python call a request in all), or None."""
        now = perf_counter_ns()
        t = self.target
        t.bytes += size
        self.count_answer(t, now, status)
        link = self.link
        if link is None or link.draining:
            # its connection takes no new stream: the slot starts over on another
            self.start_ns = 0
            self.state = CLOSED
            if link is not None:
                link.detach(self)
            self.transport = None
            t.replace(self, now)
        elif self.fast:
            self.start_ns = now
            t.sent += 1
            if self.returns_next:
                return t.request  # type: ignore[return-value]  # an H2Request (Target, HTTP/2)
            self.write_request(self.transport)
        else:
            self.start_ns = 0
            self.state = IDLE
            t.on_idle(self)
        return None

    def stream_failed(self, code: int, how: int) -> None:
        """The stream ended without a response (from the C transport: engine/_h2.h)."""
        t = self.target
        name = error_name(code)
        if how == H2_UNPROCESSED:
            kind = GOAWAY_UNPROCESSED
            t.refused += 1
        elif how == H2_RESET and code == REFUSED_STREAM:
            kind = STREAM_REFUSED
            t.refused += 1
        elif how == H2_RESET:
            kind = STREAM_RESET
            t.resets += 1
            why = f"RST_STREAM {name}"
            t.errors[why] = t.errors.get(why, 0) + 1
        elif how == H2_FAULT:
            kind = PROTOCOL  # the connection's protocol error: its reason counted with it
        else:
            kind = PROTOCOL
            why = f"stream ended by the client: {name}"
            t.errors[why] = t.errors.get(why, 0) + 1
        self._end(kind)

    def _end(self, kind: str) -> None:
        """Count the request in flight as `kind` and start the slot over (replace)."""
        t = self.target
        now = perf_counter_ns()
        t.fail_count(kind)
        t.last_done = now
        self.take_body()
        self.start_ns = 0
        self.intended_ns = 0
        self.state = CLOSED
        link = self.link
        if link is not None:
            link.detach(self)
        self.transport = None
        t.replace(self, now)

    def lost(self, kind: str) -> None:
        """Its connection ended (connection.py's connection_lost, per stream)."""
        state = self.state
        self.link = None
        self.transport = None
        self.state = CLOSED
        t = self.target
        if state == BUSY:
            t.fail_count(kind)
            self.take_body()
            self.start_ns = 0
            self.intended_ns = 0
            t.replace(self, perf_counter_ns())
        elif state in (IDLE, CONNECTING):
            t.replace(self, 0 if not self.start_ns else perf_counter_ns())

    def fail(self, kind: str) -> None:
        """The target gives up the request in flight (the sweep's timeout): its stream
        is cancelled, not its connection."""
        link = self.link
        if link is not None and self.state == BUSY:
            if kind == TIMEOUT and link.transport.stalled(self):
                kind = FLOW_STALL
            link.transport.cancel_stream(self)
        self._end(kind)

    def close(self) -> None:
        self.abort()

    def abort(self) -> None:
        link = self.link
        if link is not None and self.state == BUSY:
            link.transport.cancel_stream(self)
        self.state = CLOSED
        if link is not None:
            link.detach(self)
        self.transport = None
        self.pending = None


class CheckedH2Stream(KeepsBody, H2Stream):
    """A stream slot that keeps the body so the workload's check can read it."""

    __slots__ = ("chunks",)

    def __init__(self, target: Target) -> None:
        super().__init__(target)
        self.chunks = []
        self.keep = True


__all__ = ["CONNECTING", "CheckedH2Stream", "H2Link", "H2Pool", "H2Stream", "build_h2_request"]
