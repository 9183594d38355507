"""Data that crosses the engine boundary: what to load, and the stats that come back.

Everything here is a msgspec Struct so it travels over the control channel as JSON
and can be validated on arrival. Latencies are integers in microseconds, and every
latency summary says so in its `unit` field.

Accounting: every request the engine is responsible for ends in exactly one place. Over
any window, `sent` (requests in play: those carried in from before the window plus those
started in it) = `requests` (answered: a complete response, of any status) + the
failures that got no answer (`lost`) + `waiting` (sent, no answer yet, at the window's
end). In rate mode a request is in play from the moment it is due, so a request due but
not yet sent (every connection busy) is waiting too (`unsent`).
"""

from __future__ import annotations

import time

import msgspec

from stackrace.engine.slow_clients import ClientProfile

# The most requests a second one engine process is asked to schedule in rate mode. One
# process on one core sends at most ~60,000 keep-alive requests a second to the fastest
# server it meets (bench/engine_vs_wrk.py), and its scheduler keeps its sends on time
# (bench/rate_timing.py) well below that; a rate above this ceiling would only measure
# the engine's own backlog. A higher rate takes more processes (`load --procs`), each
# carrying an equal share. Every driver is held to it by engine.client.Engine.
MAX_RATE_PER_PROCESS = 50_000


def rate_problem(rate: float | None, procs: int) -> str | None:
    """Why `rate` (req/s over `procs` engine processes) cannot be scheduled, or None."""
    if rate is None:
        return None
    if not rate > 0 or rate != rate or rate == float("inf"):
        return f"a rate must be a positive finite number of requests a second, got {rate!r}"
    if rate > MAX_RATE_PER_PROCESS * procs:
        need = -(-rate // MAX_RATE_PER_PROCESS)
        more = f"; {need:,.0f} engine processes would be needed (--procs)" if need <= 1024 else ""
        shown = f"{rate:,.0f}" if rate < 1e9 else f"{rate:.3g}"
        return (
            f"{shown} req/s is beyond what {procs} engine process"
            f"{'es' if procs > 1 else ''} can schedule (at most "
            f"{MAX_RATE_PER_PROCESS:,} req/s each{more})"
        )
    return None


# A waiting request is starved when its age passes both: its wait is not what the
# server's queue gives everyone (the answered requests' p99 times this), and it is long
# enough for a person to see (a second).
STARVED_FACTOR = 10
STARVED_MIN_US = 1_000_000


# an h2 connection is stalled when every stream open on it (two or more) has waited this
# long: the starved limit's floor, a wait a person sees, whatever the level's p99 (the
# engine counts it where it knows each stream's connection, before any p99 is known)
STALLED_US = STARVED_MIN_US


def starved_limit_us(answered_p99_us: int) -> int:
    """The age past which a waiting request is starved, given the p99 of the answered."""
    return max(STARVED_MIN_US, STARVED_FACTOR * answered_p99_us)


# Failure kinds, in the order the UI and reports show them.
REFUSED = "refused"  # connect() refused: nothing listens on the port
CONNECT_TIMEOUT = "connect_timeout"  # connect() did not finish within connect_timeout
RESET = "reset"  # connection reset or closed while a response was due
TIMEOUT = "timeout"  # no complete response within the request timeout
HTTP_STATUS = "http_status"  # a response with status >= 400 (codes counted in `status`)
INVALID_BODY = "invalid_body"  # status < 400 but the body failed the workload's check
PROTOCOL = "protocol"  # the response was not valid HTTP/1.x, or was not asked for
TLS = "tls"  # the TLS handshake failed (certificate, protocol; the reason in `errors`)
# the reason of a `tls` failure whose handshake the connect timeout ended (TCP was up)
HANDSHAKE_TIMED_OUT = "handshake timed out"
DROPPED = (
    "dropped"  # rate mode: a scheduled send abandoned because the backlog outlived the timeout
)
# The engine stopped waiting for an answer on its own account: the concurrency was
# lowered, the rate changed, the target was removed or the load stopped. Not the
# server's failure, so the breaking-point rule leaves it out; it is still shown.
ABANDONED = "abandoned"
OTHER = "other"  # any other socket error (kept so nothing is silently lost)
# HTTP/2, per stream (engine/h2.py): the server's RST_STREAM (its error code in `errors`,
# "RST_STREAM <CODE>"), a stream refused (RST_STREAM REFUSED_STREAM: the server did not
# process it), one above a GOAWAY's last-stream-id (never processed; its request is sent
# again on a new connection, as a new request), and one whose request body waited on the
# server's flow-control window until the request timeout ended it
STREAM_RESET = "stream_reset"
STREAM_REFUSED = "stream_refused"
GOAWAY_UNPROCESSED = "goaway_unprocessed"
FLOW_STALL = "flow_stall"
# (a connection's protocol error is PROTOCOL, as in HTTP/1.1, its reason in `errors`)
H2_FAILURE_KINDS: tuple[str, ...] = (STREAM_RESET, STREAM_REFUSED, GOAWAY_UNPROCESSED, FLOW_STALL)

# Ended without an answer, and not the server's failure: the engine gave the request up
# (`abandoned`), or the server closed its connection gracefully before it read the
# stream (GOAWAY: RFC 9113 6.8 says such a stream may be sent again, and the engine does,
# as a client would). Counted and shown all the same; never held against the server
# (rules/breaking.py, rules/level.py): nginx's GOAWAY every 1,000 requests is its
# connections' lifecycle, as an HTTP/1.1 `Connection: close` is, not a breaking point.
NOT_THE_SERVERS: frozenset[str] = frozenset({ABANDONED, GOAWAY_UNPROCESSED})

FAILURE_KINDS: tuple[str, ...] = (
    REFUSED,
    CONNECT_TIMEOUT,
    TLS,
    RESET,
    TIMEOUT,
    HTTP_STATUS,
    INVALID_BODY,
    PROTOCOL,
    *H2_FAILURE_KINDS,
    DROPPED,
    ABANDONED,
    OTHER,
)
# Failures that arrive as complete responses (they are in `requests` and the histogram).
RESPONSE_FAILURES: frozenset[str] = frozenset({HTTP_STATUS, INVALID_BODY})


class BodyCheck(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How a response body is verified. Named kinds keep the check serialisable.

    kind: "exact" (body == arg), "contains" (arg in body), "json" (the body is JSON equal
    to arg), "float_range" (the body parses as a float within [lo, hi]), "nonempty".
    """

    kind: str
    arg: str = ""
    lo: float = 0.0
    hi: float = 0.0


class MixEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One kind of request in a target's mix (engine/mix.py): its request line's target
    (path and query), shape and weight. `expect`: the statuses that are answers of this
    kind; None: every status below 400 is, as for a target without a mix."""

    target: str
    method: str = "GET"
    headers: list[tuple[str, str]] = msgspec.field(default_factory=list)
    body: bytes = b""
    weight: int = 1
    expect: list[int] | None = None


class KindStats(msgspec.Struct):
    """One kind of request of a mix, over a window: sent = answered + failed + waiting
    (a request is of its kind from the moment it is written; one that never got a
    connection is in the target's failures only). `errors`: answered with a status
    that is not expected of it (in the target's `http_status` failures)."""

    sent: int = 0
    answered: int = 0
    errors: int = 0
    failed: int = 0  # ended without an answer (reset, timeout, abandoned, …)
    waiting: int = 0  # a gauge at the window's end
    status: dict[int, int] = msgspec.field(default_factory=dict)


class TargetSpec(msgspec.Struct, forbid_unknown_fields=True):
    """One thing to load: a URL and the request shape. `id` names it in snapshots."""

    id: str
    url: str
    method: str = "GET"
    headers: list[tuple[str, str]] = msgspec.field(default_factory=list)
    body: bytes = b""
    check: BodyCheck | None = None
    concurrency: int = 10
    # Requests per second for this target; None means closed loop (each connection sends
    # its next request as soon as the last one completes).
    rate: float | None = None
    # False: every request on a new connection with `Connection: close`, as ab without -k.
    keepalive: bool = True
    # The address to connect to, resolved once by the driver when it checked that the
    # target is on loopback; the engine then never resolves the name again. None: the
    # URL's host as written.
    address: str | None = None
    # Several kinds of request on this target, sent in proportion to their weights and
    # counted per kind (engine/mix.py); empty: every request is the one above.
    mix: list[MixEntry] = msgspec.field(default_factory=list)
    # https:// only. tls_verify: check the server's certificate and name (off: curl's
    # -k); cacert: a PEM file of CAs to trust instead of the system's (a self-signed
    # server's own certificate); tls_resume: offer the last session for resumption
    # (off: every connection a full handshake, as distinct clients make)
    tls_verify: bool = True
    cacert: str | None = None
    tls_resume: bool = False
    # slow clients (engine.slow_clients): this share of the connections sends each request
    # in pieces over `clients.upload` and reads at `clients.read`; None: all fast
    clients: ClientProfile | None = None
    slow_share: float = 1.0
    # closed loop: send this many requests in all from the first, then none (as ab -n,
    # `load -n`); set with the target, so not one more is sent before it applies.
    # None: no limit (a budget set later: SetBudget)
    budget: int | None = None
    # "1.1", or "2": HTTP/2, over TLS negotiated by ALPN (https) or h2c with prior
    # knowledge (http); `streams` per connection (h2load's -m), `concurrency` staying the
    # number of connections (engine/h2.py)
    http: str = "1.1"
    streams: int = 1


class EngineSettings(msgspec.Struct, forbid_unknown_fields=True):
    timeout: float = 30.0  # seconds for a whole request, connect time included
    connect_timeout: float = 5.0
    interval: float = 0.25  # seconds between stats reports
    # After a failed connect a connection waits this long before trying again, so a
    # dead target is counted as failures without the engine spinning on it.
    retry_delay: float = 0.01


class LatencySummary(msgspec.Struct):
    """Percentiles of one histogram, in microseconds. count == 0 means no sample."""

    unit: str = "us"
    count: int = 0
    mean: float = 0.0
    p50: int = 0
    p90: int = 0
    p99: int = 0
    p999: int = 0
    max: int = 0
    min: int = 0


class H2Counts(msgspec.Struct):
    """HTTP/2's figures of a window (engine/h2.py), declared once for the two places that
    carry them: a process's report of an interval (channel.py TargetReport) and the
    window's stats (WindowStats). The protocol spoken; streams in flight at the window's
    end (a gauge); GOAWAYs and RST_STREAMs received; streams refused or left unprocessed
    by a GOAWAY; the smallest SETTINGS_MAX_CONCURRENT_STREAMS a server announced (0:
    none). (A base's fields come first in the JSON a struct encodes: readers find every
    field by its name.)"""

    http: str = "1.1"
    streams_open: int = 0
    # head-of-line blocking, seen per connection (a gauge at the window's end): the
    # connections carrying two or more open streams whose every one has waited past
    # STALLED_US (rules/head_of_line.py)
    stalled_connections: int = 0
    goaways: int = 0
    resets: int = 0
    refused: int = 0
    max_streams: int = 0


class WindowStats(H2Counts, kw_only=True):
    """Counts for one window of time (one interval, or everything since the start).

    sent == requests + lost + waiting, always (see the module docstring)."""

    seconds: float = 0.0
    sent: int = 0  # requests in play in the window: carried_in + those started in it
    # of `sent`: already waiting when the window began (a window added up from parts,
    # engine/window_sum.py WindowSum, began when its first part did)
    carried_in: int = 0
    waiting: int = 0  # sent, no answer yet, at the end of the window
    unsent: int = 0  # rate mode, of `waiting`: due but not yet written (connections busy)
    # of `waiting`: the connect is still under way, so nothing was written yet (a server
    # whose accept queue is full keeps its clients here, in SYN retransmits)
    connecting: int = 0
    # of `connecting`: TCP is up and the TLS handshake is under way: the server took the
    # connection (not its accept queue) and its TLS has not answered yet
    handshaking: int = 0
    # of `waiting`: over a second old, connected as the client sees it, and the request
    # not acknowledged by the server's kernel (TCP_INFO's unacked): a handshake the
    # server's full listen backlog dropped. A request the server's kernel holds and no
    # worker has read yet is acknowledged (node-http's and uwsgi-http11's starved ones)
    unacked: int = 0
    oldest_wait_us: int = 0  # age of the oldest waiting request
    # waiting requests that have waited longer than the window itself: clients that got
    # no answer at all during it (closed loop: starved connections)
    stale: int = 0
    # Clients left without an answer while the server serves others (a worker that
    # stays on one keep-alive connection, connections a busy server leaves unread):
    # the share of the clients' time (in_flight × seconds) spent waiting past
    # `starved_limit_us` — far longer than the level's answered requests took — sampled
    # at every report (each waiting request that old counts for the interval), and the
    # oldest such wait. Counted in time, not attempts: a starved client makes one attempt
    # per timeout while a served one makes hundreds. 0 when nothing was answered (nobody
    # is served ahead of them: that is `stale`, or a wedged server).
    starved_share: float = 0.0
    starved_wait_us: int = 0
    requests: int = 0  # completed responses, any status
    ok: int = 0  # completed with status < 400 and a body that passed the check
    rps: float = 0.0  # requests / seconds
    bytes: int = 0  # response bytes read, headers included
    failures: dict[str, int] = msgspec.field(default_factory=dict)  # kind -> count
    status: dict[int, int] = msgspec.field(default_factory=dict)  # HTTP code -> count
    # why, for the `other` failures (errno names) and the `tls` ones (the handshake's
    # reason, e.g. "certificate: self-signed certificate")
    errors: dict[str, int] = msgspec.field(default_factory=dict)
    latency: LatencySummary = msgspec.field(default_factory=LatencySummary)
    # Rate mode only: latency from the time each request was *sent*. `latency` is then
    # measured from the time it should have been sent (coordinated-omission corrected).
    latency_uncorrected: LatencySummary | None = None
    late: int = 0  # rate mode: sends that left over 2 ms behind schedule (connections busy)
    # The engine's own delay before acting on a ready connection (its event loop's lag,
    # sampled, and the wait between a closed connection and its replacement's connect).
    lag: LatencySummary = msgspec.field(default_factory=LatencySummary)
    engine_cpu: float = 0.0  # percent of one core, the engine processes of this target
    # percent of the window those processes were runnable but waited for a CPU, and how
    # long each wake-up waited on average (µs): what a response waits before the engine
    # can even look at it when its core is shared
    engine_wait: float = 0.0
    engine_wait_us: float = 0.0
    # --requests (as ab -n): from the first send to the last answer, the time req/s uses
    span_seconds: float | None = None
    # the time-average of requests in flight (sampled every 50 ms): Little's L
    in_flight: float = 0.0
    # a target with a mix: each kind's figures, in the order of TargetSpec.mix
    kinds: list[KindStats] | None = None
    # responses (or bytes) that no request asked for: an extra response on a keep-alive
    # connection, bytes before a request. Never answers; the request in flight on such
    # a connection fails as `protocol`
    unsolicited: int = 0
    # new connections: the TCP connect and (https) the TLS handshake, and per request on
    # https targets the time from writing the request to its first byte. None: no sample
    connect: LatencySummary | None = None
    tls: LatencySummary | None = None
    first_byte: LatencySummary | None = None
    handshakes: int = 0  # TLS handshakes completed
    resumed: int = 0  # of them, sessions resumed (--tls-resume)
    # rate mode: how late the engine's scheduler sent the requests it had an idle
    # connection for (due time to write): the engine's own share of every corrected
    # latency. Requests that waited for a busy connection are `late` instead.
    send_lateness: LatencySummary | None = None
    # HTTP/2's figures: H2Counts (the base)

    @property
    def failed(self) -> int:
        return sum(self.failures.values())

    @property
    def started(self) -> int:
        """Of `sent`, the requests started in this window (the rest were carried in)."""
        return self.sent - self.carried_in

    @property
    def lost(self) -> int:
        """Failures that got no answer (the others are complete responses)."""
        return sum(n for k, n in self.failures.items() if k not in RESPONSE_FAILURES)

    @property
    def attempts(self) -> int:
        """Requests that ended, answered or not."""
        return self.requests + self.lost

    @property
    def goodput(self) -> float:
        """Answers that count, a second: `ok` (2xx/3xx, or the statuses a request
        expects, with a body that passed its check) over the time `rps` is timed on.
        `rps` counts every complete response, a 404 as much as a 200: the engine's
        count of what came back, never a figure of capacity."""
        timed = self.span_seconds or self.seconds
        return self.ok / timed if timed > 0 else 0.0


class TargetSnapshot(msgspec.Struct):
    id: str
    url: str
    concurrency: int  # connections asked for
    connections: int  # connections open right now
    rate: float | None
    interval: WindowStats
    total: WindowStats
    keepalive: bool = True
    procs: int = 1  # engine processes carrying this target
    # An engine process of this target ran near 100 % of its core this interval.
    saturated: bool = False
    # a target with a mix: each kind since the target was added (never restarted)
    kinds_run: list[KindStats] | None = None

    @property
    def level(self) -> int:
        """The load asked of it: req/s in rate mode (rounded), else connections."""
        return round(self.rate) if self.rate else self.concurrency


class LostEngine(msgspec.Struct, frozen=True):
    """An engine process the driver lost during the load: its host went silent or away
    (a cluster's load node), or the process died. What it had in flight at its last
    report is counted `abandoned` for each target; what it did after that report never
    reached the driver, so it is in no count (the server's own count may be higher)."""

    host: str  # where it ran: "local", or a cluster node's address
    where: str  # the link's description ("node 198.18.0.11 (ab12…) pid 4242")
    at: float  # seconds since the load started
    wall: float  # when (time.time())
    why: str  # "no report for 5s", "its node died: …", "the process exited"
    abandoned: dict[str, int] = msgspec.field(default_factory=dict)  # target id -> requests

    def describe(self) -> str:
        """One line for panes, progress and reports: which host, when, what it cost."""
        clock = time.strftime("%H:%M:%S", time.localtime(self.wall))
        lost = sum(self.abandoned.values())
        where = "this machine" if self.host == "local" else f"load host {self.host}"
        return (
            f"{where} lost at {clock} ({self.at:.1f}s into the load; {self.why}): "
            f"{lost:,} request(s) in flight counted abandoned"
        )


class EngineSnapshot(msgspec.Struct):
    """What every consumer (CLI, TUI, bench) reads, once per interval."""

    seq: int
    elapsed: float  # seconds since the load started (warm-up excluded from `total`)
    warming: bool  # True while inside the warm-up period: `total` not counting yet
    paused: bool
    procs: int
    engine_cpu: float  # percent of one core, summed over engine processes
    engine_cpu_max: float  # percent of one core, the busiest engine process
    saturated: (
        bool  # an engine process ran near 100% of its core: figures may be the engine's limit
    )
    targets: list[TargetSnapshot]
    # every engine process lost so far (a cluster's load host gone), oldest first
    lost: list[LostEngine] = msgspec.field(default_factory=list)

    def target(self, target_id: str) -> TargetSnapshot | None:
        for t in self.targets:
            if t.id == target_id:
                return t
        return None
