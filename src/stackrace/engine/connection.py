"""One client connection: a raw asyncio.Protocol fed by httptools' response parser.

This is the engine's hot path. Per response it costs one Python call, `answer` (with the
accounting every answer shares, `count_answer`): one clock read, the latency's histogram
slot counted by one C call (engine/_cycle.c `tally`) and a `transport.write` of
prebuilt bytes. On
a kept-alive connection the C transport frames the answer itself (engine/_frame.h: one
whole Content-Length response in one read) and calls `answer` directly — or, for a 2xx
on a `fast` connection of a plain target, counts it and writes the next request itself
(_cycle.c `KeptLoop`, target.py `kept`: what `answer` and `count_answer` do for that
case, with no Python frame); any other read goes through `data_received` to httptools'
parser, whose `on_message_complete` calls `answer`. Everything that is not needed on
that path (body collection, rate scheduling, budgets, retiring) is switched on per
connection, not tested per byte.

A Connection object lives for one TCP connection. When the server closes it (or asks to
with `Connection: close`), the target replaces it with a fresh object, so callbacks of a
dead transport can never touch the next one. Its transport is the engine's own
(transport.py); a test may hand it any object with an asyncio transport's methods.

`start_ns` is non-zero exactly while the connection carries a request (sent or being
connected for), which is what the target counts as waiting; every way a request ends
sets it back to zero.

A response is an answer only to a request in flight. HTTP/1.1 without pipelining has at
most one, and a response cannot answer a request written after its first byte arrived:
bytes that come while nothing is in flight, or a second response completed in the same
read as the one that answered (its bytes were here before the next request was
written), are *unsolicited*. They are counted as such, the request in flight (if any)
fails as `protocol` — the connection's responses can no longer be matched to requests —
and the connection is replaced. Informational 1xx responses precede the answer and are
not answers themselves. (An unasked response that arrives on its own after the next
request was written cannot be told from its answer by any HTTP/1.1 client; one split
across two reads is the same case.)
"""

from __future__ import annotations

import asyncio
import ctypes
import socket
from collections.abc import Callable
from time import perf_counter_ns
from typing import TYPE_CHECKING

from httptools import HttpParserError, HttpResponseParser

from stackrace.engine._cycle import Transport as CTransport
from stackrace.engine._cycle import slot, tally
from stackrace.engine.framing import close_delimited
from stackrace.engine.model import HTTP_STATUS, INVALID_BODY, PROTOCOL, RESET
from stackrace.engine.slow_clients import ClientProfile
from stackrace.engine.transport import OPEN, SocketTransport

if TYPE_CHECKING:
    from stackrace.engine.target import Target

# Connection states
CONNECTING = 0
BUSY = 1  # a request is in flight
IDLE = 2  # open, nothing in flight (rate mode between sends, or paused)
CLOSED = 3

# what a connection writes to: the event loop's transport, or the engine's own
AnyTransport = asyncio.Transport | SocketTransport | CTransport
# the engine's plain-TCP transports (the C one; the Python one under
# STACKRACE_PY_TRANSPORT): they close at once, and hand a kept-alive connection over.
# (Where mypy must narrow the type, the code spells the two identity checks out.)
PLAIN = (CTransport, SocketTransport)

_shutdown: Callable[[int, int], int] | None
try:
    _shutdown = ctypes.CDLL(None, use_errno=True).shutdown
except (OSError, AttributeError):  # pragma: no cover - not Linux
    _shutdown = None


def close_now(transport: asyncio.BaseTransport | SocketTransport | CTransport) -> None:
    """Send our FIN now, not on the loop's next turn.

    uvloop closes a transport's socket one loop iteration after close(). A server that
    half-closes and waits for the client's FIN before taking its next connection
    (gunicorn's sync worker since 27, RFC 9112 §9.6) would sit idle for that turn, so
    its figure would depend on how busy the client's loop is. wrk closes inside its
    response callback; so do we: shutdown(2) on the descriptor (uvloop's transports do
    not expose shutdown), then the normal close frees it.
    """
    if type(transport) in PLAIN:
        transport.close()  # the engine's own: the descriptor closes now, the FIN with it
        return
    if _shutdown is not None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            # SHUT_WR: the FIN is all the server waits for. SHUT_RDWR also made the
            # socket readable at once (EOF), one more wake-up and read per connection:
            # ~10 µs of the engine's CPU per new connection (bench/connect_rate.py)
            _shutdown(sock.fileno(), socket.SHUT_WR)
    transport.close()


class _Discard:
    """The parser of a connection we have ended: it reads nothing."""

    __slots__ = ()

    def feed_data(self, data: bytes) -> None:
        pass


_DISCARD = _Discard()


class Connection(asyncio.Protocol):
    __slots__ = (
        "answered",
        "connect_ns",
        "fast",
        "head",
        "intended_ns",
        "parser",
        "pending",
        "quota",
        "recycle_at",
        "retiring",
        "slow",
        "start_ns",
        "state",
        "target",
        "transport",
        "wrote_ns",
    )

    def __init__(self, target: Target) -> None:
        self.target = target
        self.transport: AnyTransport | None = None
        # made when the connection opens and dropped when it closes: the parser refers
        # back to its protocol, and a cycle per connection would leave every closed one
        # to the cyclic garbage collector (a pause in the middle of a measurement)
        self.parser: HttpResponseParser | None = None
        self.state = CONNECTING
        self.start_ns = 0  # when the request now in flight was started (connect included)
        self.intended_ns = 0  # rate mode: when it should have been sent
        self.connect_ns = 0
        # the engine's transport while its connect (or TLS handshake) is under way: the
        # target's sweep gives it up after the connect timeout
        self.pending: SocketTransport | CTransport | None = None
        self.retiring = False
        # a slow client's slot (engine.slow_clients): its profile, kept when it reconnects
        self.slow: ClientProfile | None = None
        # fast: closed loop, keep-alive, no budget, not paused, not retiring: send the
        # next request at once from the response callback.
        self.fast = False
        # --requests: sends this connection may still make (None: no budget)
        self.quota: int | None = None
        # the first chunk of the response being read: only looked at when the server
        # closes mid-response, to tell a close-delimited body from a truncated one
        self.head: bytes | None = None
        # a response completed in the read being parsed: another one beginning in the
        # same read was sent before the next request was written (unsolicited)
        self.answered = False
        self.wrote_ns = 0  # TLS targets: when the request now in flight was written
        # a connection per request on the C transport: the answer's time, when the slot's
        # next connection is to start once the read that completed it is parsed
        self.recycle_at = 0

    # --- asyncio callbacks -------------------------------------------------------

    # httptools asks for each callback once per parser (one per connection): a None
    # here answers faster than a missing attribute, and means "not wanted"
    on_url = on_header = on_headers_complete = on_status = None
    on_chunk_header = on_chunk_complete = None
    on_body: Callable[[bytes], None] | None = None  # a checked connection keeps the body

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.connected(transport, False)

    def connected(self, transport: asyncio.BaseTransport | SocketTransport, sent: bool) -> None:
        """The connection is up; `sent`: the engine's transport wrote the request
        already, together with the connect (transport.SocketTransport.connect)."""
        # asyncio.Protocol types its argument as the base of every transport; a TCP
        # connection's is a stream transport (write, abort), or the engine's own
        tr: AnyTransport = transport  # type: ignore[assignment]  # see above
        self.transport = tr
        self.parser = HttpResponseParser(self)
        self.target.open += 1
        self.begin(tr, sent)

    def begin(self, tr: AnyTransport, sent: bool) -> None:
        """Up, on a connection of its own (`connected`) or an HTTP/2 link's stream
        (h2.py H2Stream.link_up): the request waiting for it goes out (unless `sent`
        with the connect), or the slot is idle; a slot retired or a target removed
        meanwhile is let go instead."""
        t = self.target
        if self.retiring or t.removed:
            # (also one dropped while the loop's transport was being made: Target._drop
            # is only ever called on a retiring connection or a removed target)
            t.abandon(self)
            self.close()
            return
        if self.start_ns:
            # A request was waiting for this connection: its clock has been running
            # since the connect started, as ab and wrk count it.
            self.state = BUSY
            if t.timed:
                # written now, or (sent, TLS on the C transport) with the handshake's end
                self.wrote_ns = perf_counter_ns()
            if not sent:
                self.write_request(tr)
        else:
            self.state = IDLE
            t.on_idle(self)

    def write_request(self, transport: AnyTransport) -> None:
        """Write the request (a slow client overrides this to send it in pieces)."""
        transport.write(self.target.request)

    def data_received(self, data: bytes) -> None:
        if self.state != BUSY:
            if self.state == IDLE:
                self.unsolicited()  # bytes while no request is in flight
            return  # CLOSED: we ended it; whatever arrives is no answer
        t = self.target
        t.bytes += len(data)
        if self.head is None:
            self.head = data
            if t.timed:
                t.record_first_byte(perf_counter_ns() - max(self.start_ns, self.wrote_ns))
        self.answered = False
        try:
            self.parser.feed_data(data)  # type: ignore[union-attr]  # BUSY: parser made in connected()
        except HttpParserError:
            if self.state != CLOSED:
                self.fail(PROTOCOL)
        now = self.recycle_at
        if now:
            # A connection per request, closed loop, on the C transport: this slot's
            # next request on a new connection, made in the same call that closes this
            # one (our FIN now) — what Target.replace does with a fresh Connection and
            # transport, without making either (inlined: once per request). After the
            # whole read: what followed the answer in it was the old connection's (a
            # second response is unsolicited, not the next request's answer).
            self.recycle_at = 0
            t.sent += 1
            self.state = BUSY
            self.start_ns = self.connect_ns = now
            if self.transport.recycle(self, now, t.request) == OPEN:  # type: ignore[union-attr]  # set: on_message_complete checked
                self.parser = HttpResponseParser(self)  # the request went out with the connect
            else:
                self._not_connected_yet()

    def unsolicited(self) -> None:
        """A response nobody asked for: count it, fail the request in flight (the
        connection's responses can no longer be matched to requests), replace it."""
        t = self.target
        t.unsolicited += 1
        if self.state == BUSY:
            self.fail(PROTOCOL)
        elif self.state == IDLE:
            self.abort()
            t.replace(self, 0)

    def on_message_complete(self) -> None:
        # A whole response, as the parser found it. The status and keep-alive flag must
        # be read now: llhttp resets once this returns. (Also called by connection_lost
        # for a body that ended with the connection.)
        if self.answered:
            # a second response in the read that completed one: its bytes were here
            # before the request now in flight was written, so it answers nothing
            self.unsolicited()
            return
        parser = self.parser
        status = parser.get_status_code()  # type: ignore[union-attr]  # as above (hot path: no check)
        if status < 200 and status != 101:
            return  # 100 Continue, 103 Early Hints: the answer is still to come
        self.head = None
        self.answered = True
        self.answer(status, 0, self.target.keepalive and parser.should_keep_alive())  # type: ignore[union-attr]  # as above

    def answer(self, status: int, size: int, keep: bool) -> None:
        """The answer to the request in flight: all the per-request work. From the
        parser (on_message_complete: its bytes counted by data_received, `size` 0) or
        from the C transport's framer (engine/_frame.h: one whole response of `size`
        bytes in one read, kept alive), which calls it instead of data_received, so an
        answer costs one Python call."""
        now = perf_counter_ns()
        t = self.target
        if size:
            t.bytes += size
            if t.timed:
                # framed (TLS): its first byte came with the rest of it; recorded as
                # Target.record_first_byte does, inlined (two calls fewer an answer)
                wrote = self.start_ns if self.start_ns > self.wrote_ns else self.wrote_ns
                i = slot(now - wrote)
                fb = t.first_byte_times
                fb[i] = fb.get(i, 0) + 1
        self.count_answer(t, now, status)
        tr = self.transport
        if not keep:
            # `fast` is kept true only while the target is a closed loop, not paused,
            # without a budget, and the slot not retiring (Target keeps it so); presend:
            # the request is the target's one (no mix), written with the connect
            if self.fast and type(tr) is CTransport and t.presend:
                # this connection ends (nothing read from here on is an answer); the next
                # starts once the read that brought this answer is parsed (data_received)
                self.start_ns = 0
                self.state = CLOSED
                self.parser = _DISCARD  # type: ignore[assignment]  # as below
                self.recycle_at = now
                return
            self.start_ns = 0
            # as _shut(), inlined: nothing read from here on is an answer
            self.state = CLOSED
            self.parser = _DISCARD  # type: ignore[assignment]  # _Discard reads nothing
            if type(tr) is CTransport or type(tr) is SocketTransport:  # PLAIN, narrowed
                # the descriptor closes now, and our FIN leaves with it; what
                # connection_lost would do for a closed connection is done here
                tr.release()
                t.open -= 1
                self.transport = None
            elif tr is not None:
                close_now(tr)
            t.replace(self, now)
        elif not size and (
            (type(tr) is CTransport and tr.tls is None) or type(tr) is SocketTransport
        ):
            # read by the parser (not framed: chunked, split across reads, a 1xx first…)
            # on the engine's plain transport: the connection moves to the loop's
            # transport (Target.hand_over). No request in flight while it moves: the
            # next one starts (and is counted) once it is up (connected → on_idle).
            # (TLS stays where it is: its session is the C transport's.)
            self.start_ns = 0
            t.hand_over(self, tr, now)
        elif self.fast:
            self.start_ns = now
            t.sent += 1
            tr.write(t.request)  # type: ignore[union-attr]  # fast: open
        else:
            self.start_ns = 0
            self.state = IDLE
            t.on_idle(self)

    def count_answer(self, t: Target, now: int, status: int) -> None:
        """What every answer counts, HTTP/1.1's (`answer`) and an HTTP/2 stream's
        (h2.py H2Stream.answer) alike: the answer, its latency (from when it should have
        been sent in rate mode, and from when it was, apart), its status, its body's
        check. `ok` is derived later (requests minus these failures), not counted here.
        The latencies' slots are _cycle.tally's, in C: one call each, cheaper than the
        four lines of Python they replace, which pays for this call (a million answers:
        ~360 ns of Python each before, ~300 after; bench/results/2026-11-29-startup.md)."""
        t.requests += 1
        t.last_done = now
        tally(t.counts, now - (self.intended_ns or self.start_ns))
        if self.intended_ns:
            tally(t.counts_unc, now - self.start_ns)
            self.intended_ns = 0
        if status >= 300:
            t.status[status] = t.status.get(status, 0) + 1
            if status >= 400:
                t.fail_count(HTTP_STATUS)
            self.take_body()  # a checked connection must not carry this body forward
        elif t.check is not None and not t.check(self.take_body()):
            t.fail_count(INVALID_BODY)

    def _not_connected_yet(self) -> None:
        """A recycled slot whose connect did not complete inside connect(). CONNECTING:
        `connected` comes when it is up, and writes the request; CLOSED: the connect
        failed and the target hears of it on the loop's next turn. Either way no
        connection is open, and the sweep watches the connect (`pending`)."""
        tr: CTransport = self.transport  # type: ignore[assignment]  # the C transport (recycled)
        self.state = CONNECTING
        self.pending = tr
        self.transport = None
        self.parser = None
        self.target.open -= 1

    def connection_lost(self, exc: Exception | None) -> None:
        t = self.target
        if self.transport is not None:
            t.open -= 1
        state = self.state
        if state == BUSY and self.head is not None and close_delimited(self.head):
            # HTTP/1.0, or no length and no chunking: the body ends where the connection
            # does. llhttp only learns that from an EOF httptools cannot give it.
            self.transport = None
            self.on_message_complete()  # should_keep_alive() is False: it closes
            self.parser = None
            return
        self.transport = None
        self.parser = None
        self.state = CLOSED
        if state == BUSY:
            self.start_ns = 0
            t.fail_count(RESET)
            t.replace(self, perf_counter_ns())
        elif state == IDLE:
            t.replace(self, 0)
        # CLOSED: we closed it ourselves and have already arranged what comes next.

    # --- used by the target -------------------------------------------------------

    def take_body(self) -> bytes:
        return b""

    def send(self, now: int, intended: int = 0) -> None:
        """Send the prebuilt request on this idle, open connection."""
        self.state = BUSY
        self.start_ns = now
        self.intended_ns = intended
        self.wrote_ns = now
        self.write_request(self.transport)  # type: ignore[arg-type]  # sending: open

    def fail(self, kind: str) -> None:
        """Count a failure for the request in flight and start over on a new connection."""
        t = self.target
        t.fail_count(kind)
        t.last_done = perf_counter_ns()
        self.start_ns = 0
        self.intended_ns = 0
        self.abort()
        t.replace(self, perf_counter_ns())

    def close(self) -> None:
        self._shut()
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        self._shut()
        if self.transport is not None:
            self.transport.abort()

    def _shut(self) -> None:
        """We end this connection: uvloop closes it a loop turn later, and whatever
        arrives meanwhile is not an answer (its request was counted, failed or
        abandoned already), so it goes to no parser."""
        self.state = CLOSED
        if self.parser is not None:
            self.parser = _DISCARD  # type: ignore[assignment]  # _Discard reads nothing


class KeepsBody(Connection):
    """The body kept for the workload's check, for every checked kind of connection
    (HTTP/1.1, mixed, an HTTP/2 stream slot): put first among a checked class's bases.
    No slots of its own, so it combines with any Connection subclass (two bases with
    slots of their own cannot be combined); each class puts `chunks` in its own
    __slots__ and sets it in its __init__."""

    __slots__ = ()
    chunks: list[bytes]

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def take_body(self) -> bytes:
        body = b"".join(self.chunks)
        self.chunks.clear()
        return body


class CheckedConnection(KeepsBody):
    """A connection that keeps the body so the workload's check can read it."""

    __slots__ = ("chunks",)

    def __init__(self, target: Target) -> None:
        self.chunks = []
        super().__init__(target)
