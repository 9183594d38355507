"""Data that crosses the engine boundary: what to load, and the stats that come back.

Everything here is a msgspec Struct so it travels over the control channel as JSON
and can be validated on arrival. Latencies are integers in microseconds.
"""

from __future__ import annotations

import msgspec

# Failure kinds, in the order the UI and reports show them.
REFUSED = "refused"  # connect() refused: nothing listens on the port
CONNECT_TIMEOUT = "connect_timeout"  # connect() did not finish within connect_timeout
RESET = "reset"  # connection reset or closed while a response was due
TIMEOUT = "timeout"  # no complete response within the request timeout
HTTP_STATUS = "http_status"  # a response with status >= 400 (codes counted in `status`)
INVALID_BODY = "invalid_body"  # status < 400 but the body failed the workload's check
PROTOCOL = "protocol"  # the response was not valid HTTP/1.x
DROPPED = (
    "dropped"  # rate mode: a scheduled send abandoned because the backlog outlived the timeout
)
OTHER = "other"  # any other socket error (kept so nothing is silently lost)

FAILURE_KINDS: tuple[str, ...] = (
    REFUSED,
    CONNECT_TIMEOUT,
    RESET,
    TIMEOUT,
    HTTP_STATUS,
    INVALID_BODY,
    PROTOCOL,
    DROPPED,
    OTHER,
)


class BodyCheck(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How a response body is verified. Named kinds keep the check serialisable.

    kind: "exact" (body == arg), "contains" (arg in body), "json" (the body is JSON equal
    to arg), "float_range" (the body parses as a float within [lo, hi]), "nonempty".
    """

    kind: str
    arg: str = ""
    lo: float = 0.0
    hi: float = 0.0


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


class EngineSettings(msgspec.Struct, forbid_unknown_fields=True):
    timeout: float = 30.0  # seconds for a whole request, connect time included
    connect_timeout: float = 5.0
    interval: float = 0.25  # seconds between stats reports
    # After a failed connect a connection waits this long before trying again, so a
    # dead target is counted as failures without the engine spinning on it.
    retry_delay: float = 0.01


class LatencySummary(msgspec.Struct):
    """Percentiles of one histogram, in microseconds. count == 0 means no sample."""

    count: int = 0
    mean: float = 0.0
    p50: int = 0
    p90: int = 0
    p99: int = 0
    p999: int = 0
    max: int = 0
    min: int = 0


class WindowStats(msgspec.Struct):
    """Counts for one window of time (one interval, or everything since the start)."""

    seconds: float = 0.0
    requests: int = 0  # completed responses, any status
    ok: int = 0  # completed with status < 400 and a body that passed the check
    rps: float = 0.0  # requests / seconds
    bytes: int = 0  # response bytes read, headers included
    failures: dict[str, int] = msgspec.field(default_factory=dict)  # kind -> count
    status: dict[int, int] = msgspec.field(default_factory=dict)  # HTTP code -> count
    latency: LatencySummary = msgspec.field(default_factory=LatencySummary)
    # Rate mode only: latency from the time each request was *sent*. `latency` is then
    # measured from the time it should have been sent (coordinated-omission corrected).
    latency_uncorrected: LatencySummary | None = None
    late: int = 0  # rate mode: sends that left over 2 ms behind schedule (connections busy)

    @property
    def failed(self) -> int:
        return sum(self.failures.values())


class TargetSnapshot(msgspec.Struct):
    id: str
    url: str
    concurrency: int  # connections asked for
    connections: int  # connections open right now
    rate: float | None
    interval: WindowStats
    total: WindowStats


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

    def target(self, target_id: str) -> TargetSnapshot | None:
        for t in self.targets:
            if t.id == target_id:
                return t
        return None
