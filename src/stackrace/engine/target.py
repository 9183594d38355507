"""One target inside an engine process: its connections, its load model, its counters.

Closed loop: `want` connections, each sending its next request when the last completes.
Open loop (rate mode): requests are due at t0 + k/rate; an idle connection takes the
oldest due request, and its latency is measured from when that request was due
(coordinated-omission correction, as wrk2 does), with the send-to-response figure kept
in a second histogram. A due request that finds every connection busy waits and is
counted as `late`; one that waited longer than the request timeout is `dropped`, and
recorded in the corrected histogram at the timeout (it waited at least that long).
A request budget (`--requests`, as ab -n) is spread over the connections, so one
connection cannot take it all while the others wait unseen.

Rate mode's due requests are sent by a timerfd armed for the next one (timer.py), and
how late each left is kept (`send_lateness`). Connections are the engine's own sockets
(transport.py); a slow client's go through a SlowClient (slow_clients.py); https ones carry
TLS (on the C transport, engine/_cycle.c, OpenSSL driven from C), with their connect and
handshake timed apart. A handshake that stalls is `connecting` (nothing written yet) and
`handshaking` (TCP is up: the accept queue is not where it waits), and when the connect
timeout ends it, it is a `tls` failure, "handshake timed out": not a `connect_timeout`,
which says the server's kernel never completed the TCP connect.

Accounting (see model.py): a request is counted in `sent` when it starts (rate mode: when
it is due) and ends in exactly one place: answered (`requests`), failed by kind, or
still waiting, which each report gives as a gauge with the ages of the waiting requests.
Whatever the engine stops waiting for on its own account (retiring connections, a
changed rate, a removed target) is counted as `abandoned`, never dropped silently.

Long because one target's load is one state machine, driven once per request: the
closed loop, the rate schedule, a budget's quotas, opening and replacing connections,
their outcomes and timeouts all read and write the same state (its connections, the
idle ones, how many due requests went out and from when, the interval's counters)
inside the same callbacks (`on_idle`, `replace`, `_on_due`, `_connect`), and each
Connection (engine/connection.py) calls back into it and writes its counters directly
(`t.requests += 1`, `tally(t.counts, ns)`: connection.py `count_answer`), or, for the
closed loop's framed answers on kept-alive plain connections, the C transport counts
them in the target's `kept` (_cycle.c `KeptLoop`), taken into these counters before
any read of them (`take_kept`: each report, a budget's start). Cut by
part — a scheduler, an opener, a counters object, each a module — every part would reach
the others' state through one more attribute (`t.sched._sent`, `t.counters.requests`)
on every request and answer: the lookups this file and connection.py were written to
save, on the path bench/engine_vs_wrk.py holds against wrk. What is not per request is
apart already: the mix of requests (mix.py), rate mode's timer (timer.py), the spread
of a budget (spread.py), the histogram (histogram.py), the transports (transport.py,
_cycle.c).
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import ssl
from collections.abc import Callable
from time import perf_counter_ns

from stackrace.engine import mix
from stackrace.engine._cycle import KeptLoop, TlsContext
from stackrace.engine._cycle import Transport as CTransport
from stackrace.engine.channel import TargetReport
from stackrace.engine.checks import compile_check
from stackrace.engine.connection import (
    BUSY,
    CLOSED,
    CONNECTING,
    IDLE,
    CheckedConnection,
    Connection,
)
from stackrace.engine.h2 import CheckedH2Stream, H2Pool, H2Stream, build_h2_request
from stackrace.engine.histogram import LatencyHistogram, index_of
from stackrace.engine.model import (
    ABANDONED,
    CONNECT_TIMEOUT,
    DROPPED,
    HANDSHAKE_TIMED_OUT,
    HTTP_STATUS,
    INVALID_BODY,
    OTHER,
    REFUSED,
    STALLED_US,
    STARVED_MIN_US,
    TIMEOUT,
    TLS,
    EngineSettings,
    TargetSpec,
)
from stackrace.engine.poller import Poller
from stackrace.engine.request import build_request, parse_url
from stackrace.engine.slow_clients import ClientProfile, SlowClient, is_slow
from stackrace.engine.spread import split
from stackrace.engine.timer import DueTimer
from stackrace.engine.tls import c_context, client_context
from stackrace.engine.transport import HANDSHAKE, SocketTransport, TlsTransport, sockaddr, unacked

# STACKRACE_PY_TRANSPORT=1: plain and TLS connections on the Python transports, as before
# the C one (engine/_cycle.c): for comparing the two, in tests (every response shape
# counted alike: tests/integration/test_c_transport.py) and benchmarks; no user needs it
_PY_TRANSPORT = os.environ.get("STACKRACE_PY_TRANSPORT") == "1"
# STACKRACE_NO_FRAMER=1: every answer through httptools' parser, and a kept-alive
# connection handed over to the loop's transport after its first (as before the framer,
# engine/_frame.h): the same comparisons, for the framer
_NO_FRAMER = _PY_TRANSPORT or os.environ.get("STACKRACE_NO_FRAMER") == "1"
# STACKRACE_NO_KEPT=1: every framed answer through connection.py's `answer`, none counted
# by the C transport itself (Target.kept): the same comparisons, for that path
_NO_KEPT = _NO_FRAMER or os.environ.get("STACKRACE_NO_KEPT") == "1"

_RETIRE_GRACE_S = 0.2  # a retiring connection may finish its request for this long
# A send counts as late when it leaves more than 2 ms after its due time: a backlog
# behind busy connections (the scheduler's own lateness is measured apart, to the µs:
# `send_lateness`).
_LATE_NS = 2_000_000
# At most this many distinct ages are recorded for unsent requests per report (they are
# evenly spaced in time, so a sample of them describes them exactly enough).
_UNSENT_POINTS = 256


def _sparse(counts: dict[int, int]) -> list[int]:
    out: list[int] = []
    for i in sorted(counts):
        out.append(i)
        out.append(counts[i])
    return out


class Target:
    def __init__(self, spec: TargetSpec, settings: EngineSettings, loop: asyncio.AbstractEventLoop):
        self.spec = spec
        self.id = spec.id
        self.loop = loop
        u = parse_url(spec.url)
        self.host = spec.address or u.host
        self.port = u.port
        # resolved once (the driver passes the address it checked): a connect is then
        # one socket() and one connect(), never a lookup
        self.family, self.addr = sockaddr(self.host, self.port)
        self.poller = Poller.of(loop)
        self.keepalive = spec.keepalive
        # TLS: contexts built once per target from the same settings (engine/tls.py):
        # the C transport's, which keeps the session to resume itself, and Python's, for
        # the Python transport (slow clients; STACKRACE_PY_TRANSPORT); sessions offered
        # for resumption only with tls_resume (each connection is otherwise a full
        # handshake)
        self.tls: ssl.SSLContext | None = (
            client_context(spec.tls_verify, spec.cacert) if u.tls else None
        )
        # HTTP/2 (engine/h2.py): stream slots, `streams` to a connection, always on the
        # C transport (its framing is libnghttp2's, driven from there)
        self.http2 = spec.http == "2"
        self.streams = max(1, spec.streams) if self.http2 else 1
        self.h2: H2Pool | None = H2Pool(self, self.streams) if self.http2 else None
        self.tls_c: TlsContext | None = (
            c_context(u.host, spec.tls_verify, spec.cacert, spec.tls_resume, http2=self.http2)
            if u.tls and (self.http2 or not _PY_TRANSPORT)
            else None
        )
        self.tls_name = u.host if u.tls else None
        self.tls_resume = spec.tls_resume
        self.tls_session: ssl.SSLSession | None = None
        # slow clients: this share of the connection slots (engine.slow_clients)
        self.clients = spec.clients
        self.slow_share = spec.slow_share
        self._slots = 0  # connection slots made so far (which are slow: is_slow)
        # connect, handshake and first-byte times are kept where they tell something
        # apart from the total: TLS (a plain loopback connect completes inside connect())
        self.timed = self.tls is not None
        self.nodelay = self.keepalive or self.tls is not None
        # the request goes out with the connect (SocketTransport.connect), or on the C
        # transport with TLS's last handshake flight (a mix picks it later: mix.setup)
        self.presend = (self.tls is None or self.tls_c is not None) and not self.http2
        self._adopting: dict[Connection, asyncio.Task[None]] = {}
        headers = list(spec.headers)
        if not spec.keepalive and not any(k.lower() == "connection" for k, _ in headers):
            headers.append(("Connection", "close"))
        self.request = build_request(spec.url, spec.method, headers, spec.body)
        self.check: Callable[[bytes], bool] | None = compile_check(spec.check)
        self.conn_class: type[Connection] = (
            CheckedConnection if self.check is not None else Connection
        )
        if self.http2:
            # (what `request` holds for HTTP/2: the fields nghttp2 sends, built once)
            self.request = build_h2_request(spec.url, spec.method, list(spec.headers), spec.body)  # type: ignore[assignment]  # written only by H2Stream
            self.conn_class = CheckedH2Stream if self.check is not None else H2Stream
        # several kinds of request, counted per kind (engine/mix.py); None: one request
        self.mix = mix.setup(self, spec, [] if spec.keepalive else [("Connection", "close")])
        # The C transport frames the answers itself (engine/_frame.h) where an answer is
        # only counted: kept alive, no body to check, one kind of request, not HEAD
        # (whose answer's Content-Length has no body) nor CONNECT (whose 2xx answer
        # starts a tunnel); with TLS, each read's records decrypted first. While they are
        # framed, a kept-alive connection stays on it: one Python call per answer,
        # against two on the loop's transport (data_received, on_message_complete) —
        # measured in bench/engine_vs_wrk.py. At its first answer the parser had to read
        # (chunked, split across reads, anything unusual), and at the first of every
        # plain kept-alive connection when nothing is framed, a plain connection moves to
        # the loop's transport (hand_over), whose read loop is C: cheaper than the parser
        # behind the engine's transports; a TLS one stays, its answers parsed. Slow
        # clients stay on the Python transports (their pacing).
        self.frames = (
            not _NO_FRAMER
            and not self.http2
            and self.keepalive
            and self.conn_class is Connection
            and spec.method.upper() not in ("HEAD", "CONNECT")
        )
        self.timeout_ns = int(settings.timeout * 1e9)
        self.connect_timeout_ns = int(settings.connect_timeout * 1e9)
        self.retry_delay = settings.retry_delay

        # counters for the current interval (taken and reset by `take_report`)
        self.sent = 0  # requests started (closed loop); rate mode adds them as they fall due
        self.requests = 0  # complete responses; `ok` is derived from it in take_report
        self.bytes = 0
        self.late = 0
        self.failures: dict[str, int] = {}
        self.status: dict[int, int] = {}
        self.errors: dict[str, int] = {}  # detail of OTHER failures, by errno name
        self.hist = LatencyHistogram()
        self.hist_unc = LatencyHistogram()
        self.counts = self.hist.counts  # the hot path writes these lists directly
        self.counts_unc = self.hist_unc.counts
        # The closed loop's framed 2xx answers on kept-alive plain connections, counted
        # by the C transport itself, which writes the next request too (_cycle.c
        # `KeptLoop`: no Python frame per answer); its answers, sends, bytes and last
        # answer's time join the counters here before any read (`take_kept`). Not with
        # TLS (the time to the first byte is recorded per answer in Python).
        self.kept = (
            KeptLoop(self.counts, self.request)
            if self.frames and self.tls is None and not _NO_KEPT
            else None
        )
        self.lag: dict[int, int] = {}  # engine lag samples of this target (µs, sparse)
        self.inflight_sum = 0  # requests in flight, summed over samples (see sample_inflight)
        self.inflight_samples = 0
        self.last_done = 0  # perf_counter_ns of the last answer or failure
        # responses (or bytes) no request asked for: never answers (connection.py)
        self.unsolicited = 0
        # new connections: TCP connect and TLS handshake times, handshakes made and of
        # them resumed; per request on TLS targets, the time to the first byte (µs)
        self.connect_times: dict[int, int] = {}
        self.tls_times: dict[int, int] = {}
        self.first_byte_times: dict[int, int] = {}
        self.handshakes = 0
        self.resumed = 0
        # HTTP/2: GOAWAYs and RST_STREAMs received, streams refused or unprocessed, in
        # the interval; the smallest SETTINGS_MAX_CONCURRENT_STREAMS announced (0: none)
        self.goaways = 0
        self.resets = 0
        self.refused = 0
        self.max_streams = 0

        self.conns: set[Connection] = set()
        self.idle: list[Connection] = []
        self.open = 0
        self.want = 0
        self.paused = False
        self.removed = False
        self.rate: float | None = None
        # closed loop with a request budget (as ab -n): per-connection quotas
        self.budget = False
        self.budget_t0 = 0
        self._pool = 0  # budget not yet shared out (no connection to take it)
        # called once a budget is spent, every request of it ended (the worker tells the
        # driver at once: engine/channel.py `Spent`), and whether it was called already
        self.spent_hook: Callable[[str], None] | None = None
        self._spent_said = False
        self._rate_this_interval = False  # the uncorrected histogram may hold values
        self._t0 = 0
        self._sent = 0  # rate mode: due requests written (or dropped) so far
        self._due_counted = 0  # rate mode: due requests already added to `sent`
        # rate mode: a timerfd armed for the next due request (timer.py); parked while
        # every connection is busy (a connection that frees up takes the backlog itself)
        self._timer: DueTimer | None = None
        self._timer_parked = False
        # rate mode: how late the scheduler sent each request it found a connection for
        # (µs, sparse): the engine's own error in every corrected latency
        self.send_lateness: dict[int, int] = {}

    # --- counting ------------------------------------------------------------------

    def fail_count(self, kind: str) -> None:
        self.failures[kind] = self.failures.get(kind, 0) + 1

    def abandon(self, conn: Connection) -> None:
        """The engine gives up the request `conn` carries (if any): count it."""
        if conn.start_ns:
            conn.start_ns = 0
            conn.intended_ns = 0
            self.fail_count(ABANDONED)
            self.last_done = perf_counter_ns()

    def take_kept(self) -> None:
        """The answers the C transport counted (`kept`) into this interval's counters:
        before every read of `sent`, `requests`, `bytes` or `last_done`."""
        if self.kept is not None:
            requests, sent, size, last = self.kept.take()
            self.requests += requests
            self.sent += sent
            self.bytes += size
            if last > self.last_done:
                self.last_done = last

    def sample_inflight(self) -> None:
        """Count the requests in flight now (called every 50 ms, off the hot path)."""
        n = 0
        for conn in self.conns:
            if conn.start_ns:
                n += 1
        if self.rate is not None and self._t0:
            n += max(0, self._due(perf_counter_ns()) - self._sent)
        self.inflight_sum += n
        self.inflight_samples += 1

    def record_first_byte(self, ns: int) -> None:
        i = index_of(ns // 1000)
        self.first_byte_times[i] = self.first_byte_times.get(i, 0) + 1

    @property
    def ok(self) -> int:
        """Complete responses that were not failures (derived: the hot path skips it)."""
        f = self.failures
        return self.requests - f.get(HTTP_STATUS, 0) - f.get(INVALID_BODY, 0)

    def take_report(self, loop_lag: dict[int, int] | None = None) -> TargetReport:
        self.take_kept()
        now = perf_counter_ns()
        unsent = self._settle_due(now)
        waiting, connecting, handshaking, ages, unacked_ = self._waiting(now, unsent)
        streams_open, stalled = self._h2_streams(now) if self.http2 else (0, 0)
        lag = self.lag
        for i, c in (loop_lag or {}).items():
            lag[i] = lag.get(i, 0) + c
        report = TargetReport(
            id=self.id,
            sent=self.sent,
            requests=self.requests,
            ok=self.ok,
            bytes=self.bytes,
            late=self.late,
            failures=self.failures,
            status=self.status,
            errors=self.errors,
            # dropped requests are in the corrected histogram too (at the timeout)
            hist=self.hist.take_sparse(self.requests + self.failures.get(DROPPED, 0)),
            hist_unc=self._take_uncorrected(),
            open=self.open,
            want=self.want,
            rate=self.rate,
            waiting=waiting,
            unsent=unsent,
            connecting=connecting,
            handshaking=handshaking,
            unacked=unacked_,
            waiting_ages=_sparse(ages),
            lag=_sparse(lag),
            budget_t0=self.budget_t0,
            last_done=self.last_done,
            inflight_sum=self.inflight_sum,
            inflight_samples=self.inflight_samples,
            kinds=self.mix.take(self.conns) if self.mix is not None else None,
            unsolicited=self.unsolicited,
            connect_times=_sparse(self.connect_times),
            tls_times=_sparse(self.tls_times),
            first_byte_times=_sparse(self.first_byte_times),
            handshakes=self.handshakes,
            resumed=self.resumed,
            send_lateness=_sparse(self.send_lateness),
            http="2" if self.http2 else "1.1",
            streams_open=streams_open,
            stalled_connections=stalled,
            goaways=self.goaways,
            resets=self.resets,
            refused=self.refused,
            max_streams=self.max_streams,
        )
        self.inflight_sum = self.inflight_samples = 0
        self.sent = self.requests = self.bytes = self.late = 0
        self.unsolicited = self.handshakes = self.resumed = 0
        self.goaways = self.resets = self.refused = 0
        self.failures = {}
        self.status = {}
        self.errors = {}
        self.lag = {}
        self.connect_times = {}
        self.tls_times = {}
        self.first_byte_times = {}
        self.send_lateness = {}
        return report

    def _h2_streams(self, now: int) -> tuple[int, int]:
        """HTTP/2: the streams open, and the connections whose every open stream (two or
        more) has waited past STALLED_US since it was sent: head-of-line blocking seen
        per connection, which the totals can only infer. Each slot knows its connection
        (engine/h2.py's `link`): one pass over the slots, 4 times a second."""
        old = now - STALLED_US * 1000
        busy = 0
        streams: dict[int, int] = {}  # connection -> its open streams, -1 once one is young
        for c in self.conns:
            if c.state != BUSY:
                continue
            busy += 1
            link = getattr(c, "link", None)
            if link is None:
                continue
            k = id(link)
            if streams.get(k, 0) < 0:
                continue
            streams[k] = streams.get(k, 0) + 1 if 0 < c.start_ns < old else -1
        return busy, sum(1 for n in streams.values() if n >= 2)

    def _waiting(self, now: int, unsent: int) -> tuple[int, int, int, dict[int, int], int]:
        """Requests sent and not answered (plus unsent due ones), how many of them are
        still connecting (nothing written yet) and of those in the TLS handshake, their
        ages, and how many of those older than a second the server's kernel has not even
        acknowledged (`unacked`)."""
        ages: dict[int, int] = {}
        n = 0
        connecting = 0
        handshaking = 0
        lost_in_backlog = 0
        old = now - STARVED_MIN_US * 1000
        for conn in self.conns:
            start = conn.intended_ns or conn.start_ns
            if start:
                n += 1
                if conn.state == CONNECTING:
                    connecting += 1
                    if (p := conn.pending) is not None and p.state == HANDSHAKE:
                        handshaking += 1
                elif (
                    start < old
                    and (tr := conn.transport) is not None
                    and (
                        tr.unacked()
                        if type(tr) is CTransport
                        else unacked(tr.get_extra_info("socket"))
                    )
                ):
                    # a second without an answer, and the request not even in the
                    # server's kernel: one getsockopt per such request per report (few
                    # when healthy; at most the concurrency, 4 times a second)
                    lost_in_backlog += 1
                i = index_of((now - start) // 1000)
                ages[i] = ages.get(i, 0) + 1
        if unsent and self.rate:
            # due at t0 + k/rate for k in [_sent, _sent + unsent): evenly spaced ages
            step = max(1, unsent // _UNSENT_POINTS)
            k = self._sent
            end = self._sent + unsent
            while k < end:
                count = min(step, end - k)
                due_at = self._t0 + int(k * 1e9 / self.rate)
                i = index_of(max(0, now - due_at) // 1000)
                ages[i] = ages.get(i, 0) + count
                k += count
        return n + unsent, connecting, handshaking, ages, lost_in_backlog

    def _take_uncorrected(self) -> list[int] | None:
        if self.rate is None and not self._rate_this_interval:
            return None
        self._rate_this_interval = self.rate is not None
        return self.hist_unc.take_sparse()

    # --- load model ----------------------------------------------------------------

    def _fast(self) -> bool:
        # a request budget takes every send through on_idle, where it is counted
        return self.rate is None and not self.paused and not self.budget

    def set_concurrency(self, n: int) -> None:
        """`n` connections (HTTP/2: of `streams` stream slots each; `want` stays the
        connections, what a report calls the concurrency)."""
        self.want = max(0, n)
        n = self.want * self.streams
        live = [c for c in self.conns if not c.retiring]
        if n > len(live):
            now = perf_counter_ns()
            for _ in range(n - len(live)):
                self._new_connection(now if self._fast() else 0, quota=0 if self.budget else None)
        elif n < len(live):
            # retire idle and still-connecting connections first, busy ones last
            # (HTTP/2: whole connections, the newest first, so C connections remain)
            h2 = self.h2
            if h2 is not None:
                live.sort(key=h2.retire_order())
            else:
                live.sort(key=lambda c: c.state == BUSY)
            for conn in live[: len(live) - n]:
                self._retire(conn)
        if self.budget:
            self._spread_budget()

    def _retire(self, conn: Connection) -> None:
        conn.retiring = True
        conn.fast = False
        if conn.quota:
            self._pool += conn.quota  # its unspent share goes back to the others
            conn.quota = 0
        if conn.state == BUSY:
            self.loop.call_later(_RETIRE_GRACE_S, self._force_close, conn)
        else:
            self._drop(conn)

    def _force_close(self, conn: Connection) -> None:
        if conn in self.conns:
            self.abandon(conn)
            conn.abort()
            self._drop(conn)

    def _drop(self, conn: Connection) -> None:
        self.abandon(conn)
        self.conns.discard(conn)
        if conn in self.idle:
            self.idle.remove(conn)
        if conn.pending is not None and conn.state == CONNECTING and self.h2 is None:
            # (an HTTP/2 slot's pending connect is its link's, shared: close() leaves it)
            conn.pending.cancel()  # closes the socket; nothing more is counted
        # A connection being handed over (hand_over) is left to finish: cancelling the
        # adoption raced uvloop, which closes the descriptor itself when cancelled, and
        # the socket was closed a second time here, by then perhaps another
        # connection's number. Once up, `connected` finds it retiring (or its target
        # removed: every caller of _drop has one or the other) and closes it.
        conn.close()

    def _settle_due(self, now: int) -> int:
        """Rate mode: add the requests that fell due to `sent`; return those not yet sent."""
        if self.rate is None or self.paused or not self._t0:
            return 0
        due = self._due(now)
        self.sent += due - self._due_counted
        self._due_counted = due
        return due - self._sent

    def _stop_schedule(self) -> None:
        """End the current rate schedule: what fell due and was never sent is abandoned."""
        unsent = self._settle_due(perf_counter_ns())
        if unsent:
            self.failures[ABANDONED] = self.failures.get(ABANDONED, 0) + unsent
        self._t0 = self._sent = self._due_counted = 0
        self._timer_parked = False
        if self._timer is not None:
            self._timer.cancel()

    def set_rate(self, rate: float | None) -> None:
        if rate is not None and rate <= 0:
            rate = None
        self._stop_schedule()
        self.rate = rate
        if rate is not None:
            self._rate_this_interval = True
        fast = self._fast()
        for conn in self.conns:
            conn.fast = fast and not conn.retiring
        if rate is not None and not self.paused:
            if self._timer is None:
                self._timer = DueTimer(self.poller, self._on_due)
            self._t0 = perf_counter_ns()
            self._on_due()  # request 0 is due now
        elif rate is None and not self.paused:
            self._kick_idle()

    def set_budget(self, budget: int | None) -> None:
        """Send at most `budget` more requests, spread evenly over the connections (None:
        no limit). A connection whose share is spent closes, so a server that serves one
        connection at a time moves on to the next."""
        if budget is None:
            self.budget = False
            self.budget_t0 = 0
            self._pool = 0
            for conn in self.conns:
                conn.quota = None
            fast = self._fast()
            for conn in self.conns:
                conn.fast = fast and not conn.retiring
            self.set_concurrency(self.want)  # slots closed when their share ran out
            if not self.paused and self.rate is None:
                self._kick_idle()
            return
        self.budget = True
        self._spent_said = False
        self.budget_t0 = perf_counter_ns() if budget > 0 else 0
        self.take_kept()  # (what came before the budget is this interval's still)
        self.last_done = 0
        for conn in self.conns:
            conn.quota = 0
            conn.fast = False
        self._pool = budget
        live = [c for c in self.conns if not c.retiring]
        while len(live) < self.want * self.streams:
            conn = self.conn_class(self)
            conn.slow = self._next_slot()
            conn.state = CLOSED
            conn.quota = 0
            self.conns.add(conn)
            self.idle.append(conn)
            live.append(conn)
        self._spread_budget()

    def _spread_budget(self) -> None:
        """Share what is left of the budget evenly over the live connections, and set
        the idle ones going."""
        live = [c for c in self.conns if not c.retiring]
        if not live:
            return
        left = self._pool + sum(c.quota or 0 for c in live)
        self._pool = 0
        for conn, share in zip(live, split(left, len(live)), strict=True):
            conn.quota = share
        if not self.paused and self.rate is None:
            idle, self.idle = self.idle, []
            for conn in idle:
                self.on_idle(conn)

    def in_handshake(self) -> list[int]:
        """When each request now in its TLS handshake began connecting: the server took
        the connection, nothing of the request is written yet (the stop waits for them:
        worker.py)."""
        return [
            conn.connect_ns
            for conn in self.conns
            if conn.state == CONNECTING and (p := conn.pending) is not None and p.state == HANDSHAKE
        ]

    def pause(self) -> None:
        self._stop_schedule()
        self.paused = True
        for conn in self.conns:
            conn.fast = False

    def resume(self) -> None:
        self.paused = False
        self.set_rate(self.rate)

    def _kick_idle(self) -> None:
        """Closed loop: start every idle connection sending."""
        idle, self.idle = self.idle, []
        for conn in idle:
            conn.fast = self._fast() and not conn.retiring
            self.on_idle(conn)

    def _dispatch(self, conn: Connection, now: int, intended: int) -> None:
        if conn.transport is not None and conn.state == IDLE:
            conn.send(now, intended)
        else:
            # A closed slot (the server closed it, or rate mode reconnects lazily): the
            # request's clock starts now and includes the connect.
            conn.start_ns = now
            conn.intended_ns = intended
            self._connect(conn)

    def on_idle(self, conn: Connection) -> None:
        """A connection has nothing in flight: give it work, or park it."""
        if conn.retiring or self.removed:
            self._drop(conn)
            return
        if self.paused:
            self.idle.append(conn)
            return
        now = perf_counter_ns()
        if self.rate is None:
            quota = conn.quota
            if quota is not None:
                if quota <= 0:
                    self._close_spent(conn)
                    return
                conn.quota = quota - 1
            conn.fast = quota is None and self._fast()
            self.sent += 1
            self._dispatch(conn, now, 0)
            return
        due = self._due(now)
        if self._sent < due:
            # backlog: every connection was busy when this request was due
            intended = self._t0 + int(self._sent * 1e9 / self.rate)
            self._sent += 1
            if now - intended > _LATE_NS:
                self.late += 1
            self._dispatch(conn, now, intended)
        else:
            self.idle.append(conn)
            if self._timer_parked:
                self._arm()

    def _close_spent(self, conn: Connection) -> None:
        """A connection whose share of the budget is spent: close it, keep its slot."""
        if conn.transport is not None:
            conn.close()
        conn.state = CLOSED
        if conn not in self.idle:
            self.idle.append(conn)
        if self.spent_hook is not None and not self._spent_said and self._spent():
            self._spent_said = True
            self.spent_hook(self.spec.id)

    def _spent(self) -> bool:
        """The budget is spent: nothing left to share out and every slot closed with no
        share left (so no request of it is still in flight)."""
        return self._pool == 0 and all(c.state == CLOSED and not c.quota for c in self.conns)

    def replace(self, conn: Connection, now: int) -> None:
        """`conn` is finished (closed by either side): put a fresh one in its slot."""
        try:
            self.conns.remove(conn)
        except KeyError:
            return
        if self.idle and conn in self.idle:
            self.idle.remove(conn)
        if conn.retiring or self.removed:
            return
        if now and self.rate is None and not self.paused and not self.budget:
            # closed loop (as _fast): the next request goes out on a new connection now,
            # inside the callback that ended this one (inlined: once per request when
            # every request has a connection of its own)
            fresh = self.conn_class(self)
            fresh.fast = True
            fresh.slow = conn.slow  # the same client, reconnecting
            self.conns.add(fresh)
            fresh.start_ns = now
            self.sent += 1
            self._connect(fresh, now)
        else:
            fresh = self.conn_class(self)
            fresh.state = CLOSED
            fresh.quota = conn.quota
            fresh.slow = conn.slow
            self.conns.add(fresh)
            self.on_idle(fresh)

    # --- rate scheduling -----------------------------------------------------------

    def _due(self, now: int) -> int:
        assert self.rate is not None
        due = int((now - self._t0) * self.rate / 1e9) + 1
        backlog = due - self._sent
        limit = int(self.rate * self.timeout_ns / 1e9) + 1
        if backlog > limit:
            # these requests would already have timed out before being sent: failures,
            # and in the corrected histogram at least as late as the timeout (wrk2 too)
            dropped = backlog - limit
            self._sent += dropped
            self.failures[DROPPED] = self.failures.get(DROPPED, 0) + dropped
            self.hist.record(self.timeout_ns // 1000, dropped)
            self.last_done = now
        return due

    def _on_due(self) -> None:
        """The timer fired (or the rate was set): send every due request an idle
        connection can take, then arm the timer for the next one."""
        if self.rate is None or self.paused or self.removed:
            return
        rate = self.rate
        idle = self.idle
        due = self._due(perf_counter_ns())
        lateness = self.send_lateness
        while self._sent < due and idle:
            conn = idle.pop()
            intended = self._t0 + int(self._sent * 1e9 / rate)
            self._sent += 1
            now = perf_counter_ns()
            late = now - intended
            if late > _LATE_NS:
                self.late += 1
            i = index_of(late // 1000)
            lateness[i] = lateness.get(i, 0) + 1
            self._dispatch(conn, now, intended)
        self._arm()

    def _arm(self) -> None:
        """Arm the timer for the next request due, if a connection is idle to take it;
        else park it until one is (on_idle)."""
        timer = self._timer
        if timer is None or self.rate is None or self.paused or self.removed:
            return
        if not self.idle:
            self._timer_parked = True
            return
        self._timer_parked = False
        timer.at(self._t0 + int(self._sent * 1e9 / self.rate))

    # --- connections ---------------------------------------------------------------

    def _next_slot(self) -> ClientProfile | None:
        """A new connection slot: slow or not, spread evenly over the slots."""
        if self.clients is None:
            return None
        index = self._slots
        self._slots += 1
        return self.clients if is_slow(index, self.slow_share) else None

    def _new_connection(self, start_ns: int, quota: int | None = None, fast: bool = False) -> None:
        conn = self.conn_class(self)
        conn.slow = self._next_slot()
        conn.fast = fast or self._fast()
        conn.quota = quota
        self.conns.add(conn)
        conn.start_ns = start_ns
        if start_ns:
            self.sent += 1
            self._connect(conn)
        else:
            conn.state = CLOSED
            self.on_idle(conn)

    def _connect(self, conn: Connection, now: int = 0) -> None:
        """Open a connection for `conn` on the engine's own sockets (transport.py): the
        outcome comes back through connected / connect_failed — at once when the kernel
        settles the connect inside connect() (loopback does), and then the request has
        gone out with it. A replacement is opened inside the response callback of the
        connection it replaces: the engine adds no delay of its own (no lag to record)."""
        conn.state = CONNECTING
        # `now`: a replacement's caller read the clock a few µs ago (its response's end)
        now = conn.connect_ns = now or perf_counter_ns()
        slow = conn.slow
        if self.h2 is not None:
            self.h2.attach(conn, now)  # type: ignore[arg-type]  # conn_class: H2Stream
        elif slow is not None:
            self._connect_slow(conn, slow, now)
        elif self.tls_c is not None:
            # the C transport speaks TLS itself: the handshake, then the request with its
            # last flight; framed answers as for plain TCP (`frames`), a connection per
            # request recycled, nothing handed over
            conn.pending = CTransport(
                self.poller,
                conn,
                self,
                self.family,
                self.addr,
                now,
                self.request if conn.start_ns and self.presend else None,
                True,
                frame=self.frames,
                tls=self.tls_c,
            )
        elif self.tls is not None:
            conn.pending = self._tls_transport(conn, now)
        else:
            # TCP_NODELAY where a connection writes more than once (keep-alive: Nagle
            # would hold a request behind an unacknowledged segment). The C transport
            # (engine/_cycle.c): a connection the server keeps alive stays while its
            # answers are framed (`frames`, above) and is handed over to the loop's
            # transport at the first the parser reads (hand_over); one the server
            # closes (gunicorn's sync worker answers `Connection: close`) is recycled
            first = self.request if conn.start_ns and self.presend else None
            args = (self.poller, conn, self, self.family, self.addr, now, first, self.keepalive)
            if _PY_TRANSPORT:
                conn.pending = SocketTransport(*args)
            else:
                conn.pending = CTransport(*args, frame=self.frames, kept=self.kept)

    def _connect_slow(self, conn: Connection, profile: ClientProfile, now: int) -> None:
        """A slow client's connection: a SlowClient between the connection and its
        transport sends the request in pieces and paces the reads (engine.slow_clients)."""
        proxy = SlowClient(conn, profile, self.loop)
        rcvbuf = profile.rcvbuf if profile.read else 0
        if self.tls is not None:
            conn.pending = self._tls_transport(proxy, now, rcvbuf)
        else:
            conn.pending = SocketTransport(
                self.poller, proxy, self, self.family, self.addr, now, None, True, rcvbuf
            )

    def _tls_transport(
        self, protocol: Connection | SlowClient, now: int, rcvbuf: int = 0
    ) -> TlsTransport:
        """The Python TLS transport (slow clients, STACKRACE_PY_TRANSPORT) for `protocol`,
        offering the last session when --tls-resume asks for it."""
        assert self.tls is not None
        session = self.tls_session if self.tls_resume else None
        return TlsTransport(
            self.poller,
            protocol,
            self,
            self.family,
            self.addr,
            now,
            self.tls,
            self.tls_name,
            session,
            self.tls_resume,
            rcvbuf,
        )

    def hand_over(self, conn: Connection, tr: SocketTransport | CTransport, now: int) -> None:
        """Move a kept-alive connection from the engine's epoll to the event loop's own
        transport (once per connection, after its first answer). Nothing is in flight
        meanwhile: connection_made there finds it idle and gives it its next request."""
        sock = tr.detach(self.family)
        self.open -= 1  # the loop's transport counts it again in connection_made
        conn.transport = None
        conn.parser = None
        conn.pending = None
        conn.state = CONNECTING  # nothing written until the loop's transport is up
        conn.connect_ns = now  # (the sweep's connect timeout runs from here)
        self._adopting[conn] = self.loop.create_task(self._adopt(conn, sock))

    async def _adopt(self, conn: Connection, sock: socket.socket) -> None:
        try:
            await self.loop.create_connection(lambda: conn, sock=sock)
        except OSError as exc:
            # the descriptor is uvloop's once it opened it, and it closes it on failure:
            # closing it here too could close a number already given to another socket
            sock.detach()
            name = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
            self.errors[name] = self.errors.get(name, 0) + 1
            self._connect_failed(conn, OTHER)
        finally:
            self._adopting.pop(conn, None)

    # --- what a transport reports (transport.ConnectCallbacks) ------------------------

    def connect_done(self, conn: Connection, connect_ns: int, tls_ns: int, resumed: bool) -> None:
        """A TLS connection's TCP connect and handshake times."""
        i = index_of(connect_ns // 1000)
        self.connect_times[i] = self.connect_times.get(i, 0) + 1
        i = index_of(tls_ns // 1000)
        self.tls_times[i] = self.tls_times.get(i, 0) + 1
        self.handshakes += 1
        if resumed:
            self.resumed += 1

    def connect_failed(
        self, conn: Connection | SlowClient, err: int, tls: str | None = None
    ) -> None:
        c: Connection = conn.conn if isinstance(conn, SlowClient) else conn
        if tls is not None:
            self.errors[tls] = self.errors.get(tls, 0) + 1
            self._connect_failed(c, TLS)
        elif err == errno.ECONNREFUSED:
            self._connect_failed(c, REFUSED)
        else:
            name = errno.errorcode.get(err, f"errno {err}")
            self.errors[name] = self.errors.get(name, 0) + 1
            self._connect_failed(c, OTHER)

    def keep_session(self, session: ssl.SSLSession | None) -> None:
        """A TLS connection ends: keep its session to offer the next one (tls_resume)."""
        if session is not None and session.has_ticket:
            self.tls_session = session

    def _connect_failed(self, conn: Connection, kind: str) -> None:
        if conn not in self.conns:
            return
        if conn.start_ns:
            self.fail_count(kind)
            self.last_done = perf_counter_ns()
        conn.start_ns = 0
        conn.intended_ns = 0
        conn.state = CLOSED
        if conn.retiring or self.removed:
            self._drop(conn)
            return
        # Try again shortly; the request (and, in rate mode, its due time) is gone.
        self.loop.call_later(self.retry_delay, self._retry, conn)

    def _retry(self, conn: Connection) -> None:
        if conn not in self.conns or conn.retiring or self.removed:
            return
        if conn.state != CLOSED or conn.start_ns:
            return  # given work meanwhile (a budget or a rate change kicked it)
        if self._fast():
            conn.start_ns = perf_counter_ns()
            self.sent += 1
            self._connect(conn)
        else:
            self.on_idle(conn)

    def sweep(self, now: int) -> None:
        """Called every 100 ms: time out stuck connects and requests."""
        limit = self.timeout_ns
        connect_limit = self.connect_timeout_ns
        for conn in list(self.conns):
            state = conn.state
            if state == BUSY:
                if now - conn.start_ns > limit:
                    conn.fail(TIMEOUT)
            elif state == CONNECTING and now - conn.connect_ns > connect_limit:
                if conn in self._adopting:
                    continue  # a local hand-over, not a connect: it ends by itself
                pending = conn.pending
                if pending is not None and pending.state == HANDSHAKE:
                    # TCP was up: the server took the connection and its TLS stalled
                    pending.cancel()
                    self.errors[HANDSHAKE_TIMED_OUT] = self.errors.get(HANDSHAKE_TIMED_OUT, 0) + 1
                    self._connect_failed(conn, TLS)
                    continue
                if pending is not None:
                    pending.cancel()
                self._connect_failed(conn, CONNECT_TIMEOUT)

    def remove(self) -> None:
        """Stop loading: close every connection; what is in flight is abandoned."""
        self._stop_schedule()
        self.removed = True
        if self._timer is not None:
            self._timer.close()
            self._timer = None
        for conn in list(self.conns):
            self._drop(conn)
        self.idle.clear()


__all__ = ["CONNECTING", "Target"]
