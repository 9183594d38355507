"""One target inside an engine process: its connections, its load model, its counters.

Closed loop: `want` connections, each sending its next request when the last completes.
Open loop (rate mode): requests are due at t0 + k/rate; an idle connection takes the
oldest due request, and its latency is measured from when that request was due
(coordinated-omission correction, as wrk2 does), with the send-to-response figure kept
in a second histogram. A due request that finds every connection busy waits and is
counted as `late`; one that waited longer than the request timeout is `dropped`.
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Callable
from time import perf_counter_ns

from stackrace.engine.checks import compile_check
from stackrace.engine.connection import (
    BUSY,
    CLOSED,
    CONNECTING,
    IDLE,
    CheckedConnection,
    Connection,
)
from stackrace.engine.histogram import LatencyHistogram
from stackrace.engine.model import (
    CONNECT_TIMEOUT,
    DROPPED,
    HTTP_STATUS,
    INVALID_BODY,
    OTHER,
    REFUSED,
    TIMEOUT,
    EngineSettings,
    TargetSpec,
)
from stackrace.engine.request import build_request, parse_url

_RETIRE_GRACE_S = 0.2  # a retiring connection may finish its request for this long
_TICK_S = 0.001
# A send counts as late when it leaves more than one scheduler tick after its due time:
# the tick's own jitter is not lateness, a backlog behind busy connections is.
_LATE_NS = 2_000_000


class Target:
    def __init__(self, spec: TargetSpec, settings: EngineSettings, loop: asyncio.AbstractEventLoop):
        self.spec = spec
        self.id = spec.id
        self.loop = loop
        u = parse_url(spec.url)
        self.host = u.host
        self.port = u.port
        self.request = build_request(spec.url, spec.method, spec.headers, spec.body)
        self.check: Callable[[bytes], bool] | None = compile_check(spec.check)
        self.conn_class = CheckedConnection if self.check is not None else Connection
        self.timeout_ns = int(settings.timeout * 1e9)
        self.connect_timeout_ns = int(settings.connect_timeout * 1e9)
        self.retry_delay = settings.retry_delay

        # counters for the current interval (taken and reset by `take_report`)
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

        self.conns: set[Connection] = set()
        self.idle: list[Connection] = []
        self.open = 0
        self.want = 0
        self.paused = False
        self.removed = False
        self.rate: float | None = None
        # closed loop with a request budget (as ab -n): sends left, None = no limit
        self.budget: int | None = None
        self._rate_this_interval = False  # the uncorrected histogram may hold values
        self._t0 = 0
        self._sent = 0
        self._tick: asyncio.TimerHandle | None = None
        self._connecting: dict[Connection, tuple[asyncio.Task[None], int]] = {}

    # --- counting ------------------------------------------------------------------

    def fail_count(self, kind: str) -> None:
        self.failures[kind] = self.failures.get(kind, 0) + 1

    @property
    def ok(self) -> int:
        """Complete responses that were not failures (derived: the hot path skips it)."""
        f = self.failures
        return self.requests - f.get(HTTP_STATUS, 0) - f.get(INVALID_BODY, 0)

    def take_report(self) -> dict[str, object]:
        report: dict[str, object] = {
            "id": self.id,
            "requests": self.requests,
            "ok": self.ok,
            "bytes": self.bytes,
            "late": self.late,
            "failures": self.failures,
            "status": self.status,
            "errors": self.errors,
            "hist": self.hist.take_sparse(self.requests),
            "hist_unc": self._take_uncorrected(),
            "open": self.open,
            "want": self.want,
            "rate": self.rate,
        }
        self.requests = self.bytes = self.late = 0
        self.failures = {}
        self.status = {}
        self.errors = {}
        return report

    def _take_uncorrected(self) -> list[int] | None:
        if self.rate is None and not self._rate_this_interval:
            return None
        self._rate_this_interval = self.rate is not None
        return self.hist_unc.take_sparse()

    # --- load model ----------------------------------------------------------------

    def _fast(self) -> bool:
        # a request budget takes every send through on_idle, where it is counted
        return self.rate is None and not self.paused and self.budget is None

    def set_concurrency(self, n: int) -> None:
        n = max(0, n)
        live = [c for c in self.conns if not c.retiring]
        self.want = n
        if n > len(live):
            now = perf_counter_ns()
            for _ in range(n - len(live)):
                self._new_connection(now if self._fast() else 0)
        elif n < len(live):
            # retire idle and still-connecting connections first, busy ones last
            live.sort(key=lambda c: c.state == BUSY)
            for conn in live[: len(live) - n]:
                self._retire(conn)

    def _retire(self, conn: Connection) -> None:
        conn.retiring = True
        conn.fast = False
        if conn.state == BUSY:
            self.loop.call_later(_RETIRE_GRACE_S, self._force_close, conn)
        else:
            self._drop(conn)

    def _force_close(self, conn: Connection) -> None:
        if conn in self.conns:
            conn.state = CLOSED
            if conn.transport is not None:
                conn.transport.abort()
            self._drop(conn)

    def _drop(self, conn: Connection) -> None:
        self.conns.discard(conn)
        if conn in self.idle:
            self.idle.remove(conn)
        pending = self._connecting.pop(conn, None)
        if pending is not None:
            pending[0].cancel()
        conn.close()

    def set_rate(self, rate: float | None) -> None:
        if rate is not None and rate <= 0:
            rate = None
        self.rate = rate
        if rate is not None:
            self._rate_this_interval = True
        fast = self._fast()
        for conn in self.conns:
            conn.fast = fast and not conn.retiring
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        if rate is not None and not self.paused:
            self._t0 = perf_counter_ns()
            self._sent = 0
            self._schedule_tick()
        elif rate is None and not self.paused:
            self._kick_idle()

    def set_budget(self, budget: int | None) -> None:
        """Send at most `budget` more requests (None: no limit), then let connections idle."""
        self.budget = budget
        fast = self._fast()
        for conn in self.conns:
            conn.fast = fast and not conn.retiring
        if not self.paused and self.rate is None:
            idle, self.idle = self.idle, []
            for conn in idle:
                self.on_idle(conn)

    def pause(self) -> None:
        self.paused = True
        for conn in self.conns:
            conn.fast = False
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None

    def resume(self) -> None:
        self.paused = False
        self.set_rate(self.rate)

    def _kick_idle(self) -> None:
        """Closed loop: start every idle connection sending."""
        now = perf_counter_ns()
        idle, self.idle = self.idle, []
        for conn in idle:
            conn.fast = not conn.retiring
            self._dispatch(conn, now, 0)

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
            if self.budget is not None:
                if self.budget <= 0:
                    self.idle.append(conn)
                    return
                self.budget -= 1
            conn.fast = self.budget is None
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

    def replace(self, conn: Connection, now: int) -> None:
        """`conn` is finished (closed by either side): put a fresh one in its slot."""
        if conn not in self.conns:
            return
        self.conns.discard(conn)
        if conn in self.idle:
            self.idle.remove(conn)
        if conn.retiring or self.removed:
            return
        if now and self._fast():
            self._new_connection(now)
        else:
            fresh = self.conn_class(self)
            fresh.state = CLOSED
            self.conns.add(fresh)
            self.on_idle(fresh)

    # --- rate scheduling -----------------------------------------------------------

    def _due(self, now: int) -> int:
        assert self.rate is not None
        due = int((now - self._t0) * self.rate / 1e9) + 1
        backlog = due - self._sent
        limit = int(self.rate * self.timeout_ns / 1e9) + 1
        if backlog > limit:
            # these requests would already have timed out before being sent
            dropped = backlog - limit
            self._sent += dropped
            self.failures[DROPPED] = self.failures.get(DROPPED, 0) + dropped
        return due

    def _schedule_tick(self) -> None:
        self._tick = self.loop.call_later(_TICK_S, self._on_tick)

    def _on_tick(self) -> None:
        self._tick = None
        if self.rate is None or self.paused or self.removed:
            return
        now = perf_counter_ns()
        due = self._due(now)
        rate = self.rate
        while self._sent < due and self.idle:
            conn = self.idle.pop()
            intended = self._t0 + int(self._sent * 1e9 / rate)
            self._sent += 1
            if now - intended > _LATE_NS:
                self.late += 1
            self._dispatch(conn, now, intended)
        self._schedule_tick()

    # --- connections ---------------------------------------------------------------

    def _new_connection(self, start_ns: int) -> None:
        conn = self.conn_class(self)
        conn.fast = self._fast()
        self.conns.add(conn)
        conn.start_ns = start_ns
        if start_ns:
            self._connect(conn)
        else:
            conn.state = CLOSED
            self.on_idle(conn)

    def _connect(self, conn: Connection) -> None:
        conn.state = CONNECTING
        conn.connect_ns = perf_counter_ns()
        task = self.loop.create_task(self._open(conn))
        self._connecting[conn] = (task, conn.connect_ns)

    async def _open(self, conn: Connection) -> None:
        try:
            await self.loop.create_connection(lambda: conn, self.host, self.port)
        except asyncio.CancelledError:
            self._connecting.pop(conn, None)
            if conn in self.conns and conn.state == CONNECTING:
                self._connect_failed(conn, CONNECT_TIMEOUT)
            return
        except ConnectionRefusedError:
            self._connecting.pop(conn, None)
            self._connect_failed(conn, REFUSED)
            return
        except OSError as exc:
            self._connecting.pop(conn, None)
            name = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
            self.errors[name] = self.errors.get(name, 0) + 1
            self._connect_failed(conn, OTHER)
            return
        self._connecting.pop(conn, None)

    def _connect_failed(self, conn: Connection, kind: str) -> None:
        if conn not in self.conns:
            return
        self.fail_count(kind)
        conn.state = CLOSED
        if conn.retiring or self.removed:
            self._drop(conn)
            return
        # Try again shortly; the request (and, in rate mode, its due time) is gone.
        conn.intended_ns = 0
        self.loop.call_later(self.retry_delay, self._retry, conn)

    def _retry(self, conn: Connection) -> None:
        if conn not in self.conns or conn.retiring or self.removed:
            return
        if self._fast():
            conn.start_ns = perf_counter_ns()
            self._connect(conn)
        else:
            conn.start_ns = 0
            self.on_idle(conn)

    def sweep(self, now: int) -> None:
        """Called every 100 ms: time out stuck connects and requests."""
        for task, started in list(self._connecting.values()):
            if now - started > self.connect_timeout_ns:
                task.cancel()
        limit = self.timeout_ns
        for conn in list(self.conns):
            if conn.state == BUSY and now - conn.start_ns > limit:
                conn.fail(TIMEOUT)

    def remove(self) -> None:
        self.removed = True
        if self._tick is not None:
            self._tick.cancel()
        for conn in list(self.conns):
            self._drop(conn)
        self.idle.clear()
