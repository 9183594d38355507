"""Several kinds of request on one target: a weighted mix, and its answers per kind.

`--path /a:3 --path /b:1` (or a scenario file) asks for a mix on one server. A target
without one never meets this module: `setup` returns None, its connections stay the
plain classes, and the hot path is exactly what it was.

With a mix:
- **No random number per request.** The weights become one precomputed sequence of
  kinds (smooth weighted round-robin, as nginx spreads upstream weights: 3:1 is
  a a b a, not a a a b), walked by one index. Over any whole turn of the sequence the
  proportions are exact, and a test can compare them with what the server counted.
- **The request bytes are chosen, not built.** Each kind's request is prebuilt; the
  target's `request` attribute (what the connection writes) is set to the chosen
  kind's bytes just before each write, so the connection's own write path is
  unchanged. A connection remembers the kind it sent (`kind`).
- **Counted per kind only here.** `MixedConnection` (and its checked twin) override
  the three places a request is written (`connected` with a request waiting,
  `send`, and the keep-alive fast path in `on_message_complete`) and count the answer
  before handing over to `Connection`. Sent and answered are counted as they happen;
  failed is derived when a report is taken (sent − answered − waiting, cumulative), so
  every way a request can end without an answer (reset, timeout, abandoned) is covered
  without a hook in each.
- **An expected status.** A kind may expect statuses other than "below 400" (a
  scenario's `expect = "404"`): its answers are then judged by that, and the target's
  `http_status` failures are corrected to match, so every figure (ok, failures,
  breaking point) agrees with the expectation.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from stackrace.engine._cycle import H2Request
from stackrace.engine.connection import BUSY, PLAIN, CheckedConnection, Connection, KeepsBody
from stackrace.engine.h2 import CheckedH2Stream, H2Stream, build_h2_request
from stackrace.engine.model import HTTP_STATUS, KindStats, TargetSpec
from stackrace.engine.request import build_request, parse_url
from stackrace.engine.transport import SocketTransport

if TYPE_CHECKING:
    from stackrace.engine.target import Target


def sequence(weights: list[int]) -> list[int]:
    """Kinds in the order they are sent: each kind `weight / gcd` times per turn,
    spread evenly (smooth weighted round-robin)."""
    g = 0
    for weight in weights:
        g = math.gcd(g, weight)
    w = [x // g for x in weights]
    total = sum(w)
    current = [0] * len(w)
    out: list[int] = []
    for _ in range(total):
        for i, x in enumerate(w):
            current[i] += x
        j = max(range(len(w)), key=current.__getitem__)
        current[j] -= total
        out.append(j)
    return out


class Mix:
    """The mix of one target in one engine process."""

    __slots__ = (
        "answered",
        "errors",
        "expect",
        "failed_before",
        "n",
        "pos",
        "requests",
        "sent",
        "seq",
        "status",
        "taken",
    )

    def __init__(self, spec: TargetSpec, extra_headers: list[tuple[str, str]]) -> None:
        u = parse_url(spec.url)
        base = f"http://{u.host_header}"
        self.requests: list[bytes] | list[H2Request] = [
            build_request(base + e.target, e.method, [*e.headers, *extra_headers], e.body)
            for e in spec.mix
        ]
        if spec.http == "2":
            # HTTP/2's kinds: the fields nghttp2 sends, with the URL's own scheme
            base = f"{'https' if u.tls else 'http'}://{u.host_header}"
            self.requests = [
                build_h2_request(base + e.target, e.method, list(e.headers), e.body)
                for e in spec.mix
            ]
        self.expect = [frozenset(e.expect) if e.expect is not None else None for e in spec.mix]
        self.seq = sequence([max(1, e.weight) for e in spec.mix])
        self.n = len(self.seq)
        self.pos = 0
        k = len(spec.mix)
        # cumulative since the target was added; a report takes the difference
        self.sent = [0] * k
        self.answered = [0] * k
        self.errors = [0] * k
        self.status: list[dict[int, int]] = [{} for _ in range(k)]
        self.taken = [KindStats() for _ in range(k)]
        self.failed_before = [0] * k

    def count_answer(self, t: Target, k: int, status: int) -> None:
        """An answer of kind `k`: counted for its kind, and judged by its expected
        statuses (the target's `http_status` failures corrected to match)."""
        self.answered[k] += 1
        counts = self.status[k]
        counts[status] = counts.get(status, 0) + 1
        expect = self.expect[k]
        if expect is None:
            if status >= 400:
                self.errors[k] += 1
        elif status in expect:
            if status >= 400:  # Connection counts it as a failure: it is not one here
                t.failures[HTTP_STATUS] = t.failures.get(HTTP_STATUS, 0) - 1
        else:
            self.errors[k] += 1
            if status < 400:  # Connection would not count it: it is one here
                t.fail_count(HTTP_STATUS)
                if status < 300:
                    t.status[status] = t.status.get(status, 0) + 1

    def take(self, conns: Iterable[Connection]) -> list[KindStats]:
        """Each kind's figures since the last report (waiting: now)."""
        waiting = [0] * len(self.sent)
        for conn in conns:
            if conn.start_ns and conn.state == BUSY:
                waiting[conn.kind] += 1  # type: ignore[attr-defined]  # a mix has only mixed connections
        out = []
        for k, was in enumerate(self.taken):
            failed = self.sent[k] - self.answered[k] - waiting[k]
            status = {c: n - was.status.get(c, 0) for c, n in self.status[k].items()}
            out.append(
                KindStats(
                    sent=self.sent[k] - was.sent,
                    answered=self.answered[k] - was.answered,
                    errors=self.errors[k] - was.errors,
                    failed=failed - self.failed_before[k],
                    waiting=waiting[k],
                    status={c: n for c, n in status.items() if n},
                )
            )
            self.taken[k] = KindStats(
                sent=self.sent[k],
                answered=self.answered[k],
                errors=self.errors[k],
                status=dict(self.status[k]),
            )
            self.failed_before[k] = failed
        return out


class MixedConnection(Connection):
    """A connection of a target with a mix: picks each request's kind, counts its answer."""

    __slots__ = ("kind",)

    def __init__(self, target: Target) -> None:
        self.kind = 0
        super().__init__(target)

    def _pick(self) -> None:
        t = self.target
        m: Mix = t.mix  # type: ignore[assignment]  # a mixed connection's target has one (setup)
        pos = m.pos
        k = m.seq[pos]
        pos += 1
        m.pos = 0 if pos == m.n else pos
        m.sent[k] += 1
        self.kind = k
        t.request = m.requests[k]  # type: ignore[assignment]  # HTTP/2's: an H2Request (h2.py)

    def connected(self, transport: asyncio.BaseTransport | SocketTransport, sent: bool) -> None:
        # (a mixed target never has its request written with the connect: `setup` turns
        # the target's presend off, so `sent` is False and the kind is picked here)
        t = self.target
        if self.start_ns and not (self.retiring or t.removed):
            self._pick()  # a request waited for this connection: Connection writes it
        Connection.connected(self, transport, sent)

    def send(self, now: int, intended: int = 0) -> None:
        self._pick()
        Connection.send(self, now, intended)

    def on_message_complete(self) -> None:
        # Connection's two gates first, or a kind counts what is no answer of it: a
        # second response in one read (unsolicited: Connection counts it) and an interim
        # 1xx (100, 103: the answer is still to come). Without them `/early` in a mix
        # read "sent 768 = 1,534 answered + -767 failed".
        parser = self.parser
        status = parser.get_status_code()  # type: ignore[union-attr]  # BUSY: has a parser
        if self.answered or (status < 200 and status != 101):
            Connection.on_message_complete(self)
            return
        t = self.target
        m: Mix = t.mix  # type: ignore[assignment]  # as in _pick: no None check per answer
        m.count_answer(t, self.kind, status)
        if (
            self.fast
            and t.keepalive
            and parser.should_keep_alive()  # type: ignore[union-attr]  # as above
            and type(self.transport) not in PLAIN  # a plain one is handed over instead
        ):
            self._pick()  # Connection's fast path writes the next request at once
            # (a connection handed over to the loop's transport writes nothing now: its
            # next request is picked in `send`, once the loop's transport is up)
        Connection.on_message_complete(self)


class MixedH2Stream(H2Stream):
    """An HTTP/2 stream slot of a target with a mix: every request it writes goes
    through `write_request` (a connect's, a send's, the closed loop's next), so the kind
    is picked there; the answer is counted for its kind before H2Stream's accounting."""

    __slots__ = ("kind",)
    returns_next = False  # each request's kind is picked in write_request

    def __init__(self, target: Target) -> None:
        self.kind = 0
        super().__init__(target)

    def write_request(self, transport: Any) -> None:
        MixedConnection._pick(self)  # type: ignore[arg-type]  # the same two attributes
        H2Stream.write_request(self, transport)

    def move(self) -> None:
        if self.start_ns:
            # the same request goes to another connection: picked (and counted) again there
            self.target.mix.sent[self.kind] -= 1  # type: ignore[union-attr]  # a mixed slot's target has one
        H2Stream.move(self)

    def answer(self, status: int, size: int, keep: bool) -> H2Request | None:  # type: ignore[override]  # as H2Stream.answer
        self.target.mix.count_answer(self.target, self.kind, status)  # type: ignore[union-attr]  # as above
        return H2Stream.answer(self, status, size, keep)


class MixedCheckedH2Stream(KeepsBody, MixedH2Stream):
    """A mixed stream slot that keeps the body for a check."""

    __slots__ = ("chunks",)

    def __init__(self, target: Target) -> None:
        self.chunks = []
        super().__init__(target)
        self.keep = True


class MixedCheckedConnection(KeepsBody, MixedConnection):
    """A mixed connection that keeps the body for a check (as CheckedConnection)."""

    __slots__ = ("chunks",)

    def __init__(self, target: Target) -> None:
        self.chunks = []
        super().__init__(target)


def setup(target: Target, spec: TargetSpec, extra_headers: list[tuple[str, str]]) -> Mix | None:
    """Give `target` its mix (None: the spec has none, nothing changes)."""
    if not spec.mix:
        return None
    mix = Mix(spec, extra_headers)
    if target.http2:
        target.conn_class = (
            MixedCheckedH2Stream if target.conn_class is CheckedH2Stream else MixedH2Stream
        )
    else:
        target.conn_class = (
            MixedCheckedConnection if target.conn_class is CheckedConnection else MixedConnection
        )
    target.request = mix.requests[mix.seq[0]]  # type: ignore[assignment]  # as in _pick
    # the request a connect writes with it (transport.SocketTransport's `first`) is
    # taken before the connection could pick its kind: a mix picks in `connected`
    target.presend = False
    return mix
