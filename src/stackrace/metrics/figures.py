"""Each target's counters, gauges and latency histogram, from the engine's snapshots,
written in the OpenMetrics 1.0 text format.

Counters add up every snapshot's *interval* window. Intervals are disjoint and every
request the engine handles ends in exactly one of them (engine/model.py), so the
counters are exact and only grow: a bench level or the app's slider restarting the
engine's running totals does not restart them, and warm-up load counts too (a dashboard
beside the servers' own metrics must show what the servers served). At any scrape,
sent = responses without a failure-with-answer + failures without an answer + waiting,
as in every stackrace figure.

The histogram's buckets come from the engine's own HdrHistogram: an interval's bucket
counts are the difference between the running totals' histograms of two snapshots,
exact to the histogram's 0.1 %. Where the totals do not hold the interval (warm-up, in
which they do not count, or an interval in which they restarted part-way) the
interval's answers are spread over the buckets from its percentiles (min, p50, p90, p99,
p99.9, max), linearly between them: `_count` and `_sum` stay exact, only those
intervals' split between buckets is estimated.

A classic histogram, not a native one: Prometheus reads native histograms only from its
protobuf format, which a text exporter without a dependency cannot write.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from stackrace import __version__
from stackrace.engine.histogram import COUNTS_LEN, LatencyHistogram, index_of
from stackrace.engine.model import (
    FAILURE_KINDS,
    EngineSnapshot,
    LatencySummary,
    TargetSnapshot,
)
from stackrace.stacks.sampler import ResourceSample

# Upper bounds in µs: from 100 µs (a keep-alive hello on loopback) to 10 s (the default
# request timeout), about ×2.5 apart, so histogram_quantile() interpolates over narrow
# buckets where web latencies fall. Each is a whole µs value the HdrHistogram layout
# resolves exactly or to within 0.1 %.
BUCKETS_US = (
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000,
    100_000, 250_000, 500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000,
)  # fmt: skip
# bucket j holds the slots from the one after bound j-1's up to bound j's own; the last
# bucket, every slot above the highest bound (it shows only in le="+Inf")
_EDGES = [0, *(index_of(b) + 1 for b in BUCKETS_US), COUNTS_LEN]
_N = len(BUCKETS_US) + 1

CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"


class HistogramSource(Protocol):
    """What gives the running totals' histogram of a target (engine.client.Engine)."""

    def total_histogram(self, target_id: str, uncorrected: bool = False) -> LatencyHistogram: ...


@dataclass
class TargetFigures:
    sent: int = 0
    responses: dict[str, int] = field(default_factory=dict)  # by code label
    failures: dict[str, int] = field(default_factory=dict)
    bytes: int = 0
    buckets: list[int] = field(default_factory=lambda: [0] * _N)  # per bucket, not cumulative
    latency_sum: float = 0.0  # seconds
    current: TargetSnapshot | None = None  # in the latest snapshot; None once it is gone
    # the totals' histogram at the last snapshot, per bucket: (engine, buckets), to subtract
    prev: tuple[int, list[int]] | None = None


def buckets_of(hist: LatencyHistogram) -> list[int]:
    """Counts per bucket (not cumulative) of a histogram in the engine's layout: one C-level
    sum per bucket over the dense array (~0.25 ms a target with the copy; walking the
    non-zero slots in Python took 1.3 ms, 4 Hz per target)."""
    counts = hist.counts
    return [sum(counts[lo:hi]) for lo, hi in itertools.pairwise(_EDGES)]


def estimated_buckets(lat: LatencySummary) -> list[int]:
    """`lat.count` answers spread over the buckets along the piecewise-linear
    distribution through the summary's percentiles."""
    n = lat.count
    if n <= 0:
        return [0] * _N
    points = [
        (lat.min, 0.0),
        (lat.p50, 0.5),
        (lat.p90, 0.9),
        (lat.p99, 0.99),
        (lat.p999, 0.999),
        (lat.max, 1.0),
    ]
    out = [0] * _N
    below = 0
    for j, bound in enumerate(BUCKETS_US):
        upto = min(n, max(below, round(_share_at(points, bound) * n)))
        out[j] = upto - below
        below = upto
    out[-1] = n - below
    return out


def _share_at(points: list[tuple[int, float]], value: int) -> float:
    if value < points[0][0]:
        return 0.0
    if value >= points[-1][0]:
        return 1.0
    for (v0, f0), (v1, f1) in itertools.pairwise(points):
        if v0 <= value < v1:
            return f0 + (f1 - f0) * (value - v0) / (v1 - v0)
    return 1.0


class RaceFigures:
    """The figures of every target seen, fed one snapshot at a time (`ingest`)."""

    def __init__(self) -> None:
        self.targets: dict[str, TargetFigures] = {}
        self.resources: dict[str, ResourceSample] = {}
        self.engine_procs = 0
        self._last_seq: dict[int, int] = {}  # per engine: snapshots already counted

    def ingest(
        self, snap: EngineSnapshot, hist: HistogramSource | None = None, engine: int = 0
    ) -> None:
        """Count one snapshot of the engine `engine` (any key naming it: an engine's
        snapshots restart their sequence). A snapshot seen before is ignored."""
        if self._last_seq.get(engine, -1) >= snap.seq:
            return
        self._last_seq[engine] = snap.seq
        self.engine_procs = snap.procs
        present = set()
        for t in snap.targets:
            present.add(t.id)
            f = self.targets.setdefault(t.id, TargetFigures())
            self._count(f, t, hist, engine)
            f.current = t
        for tid, f in self.targets.items():
            if tid not in present:
                f.current = None
                f.prev = None

    def _count(
        self, f: TargetFigures, t: TargetSnapshot, hist: HistogramSource | None, engine: int
    ) -> None:
        w = t.interval
        f.sent += w.started  # a counter: each request once, in the interval it began
        coded = 0
        for code, n in w.status.items():
            # the engine counts codes from 300 up (a dict update per 200 would cost the
            # hot path): below that, one "2xx"
            f.responses[str(code)] = f.responses.get(str(code), 0) + n
            coded += n
        if w.requests - coded:
            f.responses["2xx"] = f.responses.get("2xx", 0) + w.requests - coded
        for kind, n in w.failures.items():
            f.failures[kind] = f.failures.get(kind, 0) + n
        f.bytes += w.bytes
        f.latency_sum += w.latency.mean * w.latency.count / 1e6
        for j, n in enumerate(self._interval_buckets(f, t, hist, engine)):
            f.buckets[j] += n

    def _interval_buckets(
        self, f: TargetFigures, t: TargetSnapshot, hist: HistogramSource | None, engine: int
    ) -> list[int]:
        lat = t.interval.latency
        now: list[int] | None = None
        if hist is not None:
            try:
                now = buckets_of(hist.total_histogram(t.id))
            except KeyError:  # the target left the engine since the snapshot
                now = None
        prev = f.prev[1] if f.prev is not None and f.prev[0] == engine else None
        f.prev = None if now is None else (engine, now)
        if now is not None and sum(now) == t.total.latency.count:
            if prev is not None and sum(now) == sum(prev) + lat.count:
                delta = [a - b for a, b in zip(now, prev, strict=True)]
                if min(delta) >= 0:
                    return delta  # the totals went on by exactly this interval
            if sum(now) == lat.count:
                return now  # the totals hold this interval alone (they restarted at it)
        return estimated_buckets(lat)

    def set_resources(self, resources: Mapping[str, ResourceSample | None]) -> None:
        self.resources = {k: v for k, v in resources.items() if v is not None}

    # --- the exposition ----------------------------------------------------------------

    def render(self) -> str:
        """The OpenMetrics text of every figure, ending with `# EOF`."""
        out: list[str] = []
        fam = _Families(out)
        fam.add("stackrace_build", "info", "this stackrace", [({"version": __version__}, 1)])
        procs: list[tuple[Labels, float | int]] = [({}, self.engine_procs)]
        fam.add("stackrace_engine_processes", "gauge", "engine processes", procs)
        every = sorted(self.targets.items())
        live = [(tid, f, f.current) for tid, f in every if f.current is not None]
        fam.add(
            "stackrace_requests_sent",
            "counter",
            "requests put in play (rate mode: from the moment each was due)",
            [({"target": tid}, f.sent) for tid, f in every],
        )
        fam.add(
            "stackrace_responses",
            "counter",
            "complete responses, by status (every code below 300 is 2xx)",
            [
                ({"target": tid, "code": code}, n)
                for tid, f in every
                for code, n in sorted(f.responses.items())
            ],
        )
        fam.add(
            "stackrace_request_failures",
            "counter",
            "failed requests by kind; http_status and invalid_body ones are responses too",
            [
                ({"target": tid, "kind": k}, f.failures.get(k, 0))
                for tid, f in every
                for k in _kinds(f.failures)
            ],
        )
        fam.add(
            "stackrace_response_bytes",
            "counter",
            "response bytes read, headers included",
            [({"target": tid}, f.bytes) for tid, f in every],
            unit="bytes",
        )
        fam.histogram(
            "stackrace_request_duration_seconds",
            "latency of answered requests (rate mode: from when each was due)",
            [({"target": tid}, f) for tid, f in every],
        )
        for name, help_text, value, unit in _TARGET_GAUGES:
            fam.add(
                name,
                "gauge",
                help_text,
                [({"target": tid}, v) for tid, _, t in live if (v := value(t)) is not None],
                unit=unit,
            )
        for name, help_text, of, unit in _STACK_GAUGES:
            fam.add(
                name,
                "gauge",
                help_text,
                [({"target": k}, of(r)) for k, r in sorted(self.resources.items())],
                unit=unit,
            )
        out.append("# EOF\n")
        return "".join(out)


# The gauges of each target loaded now, from its last interval (None: not given, as the
# rate in closed loop), and of each stack's process tree, from its last sample: (name,
# help, value, unit), written in this order.
_TARGET_GAUGES: list[
    tuple[str, str, Callable[[TargetSnapshot], float | int | None], str | None]
] = [
    (
        "stackrace_requests_waiting",
        "requests sent and not yet answered",
        lambda t: t.interval.waiting,
        None,
    ),
    (
        "stackrace_requests_connecting",
        "of the waiting requests: still in the connect (the server's accept queue full)",
        lambda t: t.interval.connecting,
        None,
    ),
    (
        "stackrace_requests_unacked",
        "of the waiting requests: over a second old and not acknowledged by the "
        "server's kernel (a handshake its full listen backlog dropped)",
        lambda t: t.interval.unacked,
        None,
    ),
    (
        "stackrace_requests_oldest_wait_seconds",
        "age of the oldest waiting request",
        lambda t: t.interval.oldest_wait_us / 1e6,
        "seconds",
    ),
    (
        "stackrace_clients_starved_ratio",
        "share of the clients' time over the last interval spent without an answer "
        "far past the answered requests' p99 (engine/model.py starved_share): "
        "some clients starve while others are served",
        lambda t: t.interval.starved_share,
        "ratio",
    ),
    (
        "stackrace_requests_in_flight",
        "requests in flight, time-averaged over the last interval",
        lambda t: t.interval.in_flight,
        None,
    ),
    (
        "stackrace_connections",
        "connections open",
        lambda t: t.connections,
        None,
    ),
    (
        "stackrace_connections_wanted",
        "connections asked for",
        lambda t: t.concurrency,
        None,
    ),
    (
        "stackrace_rate_wanted_requests_per_second",
        "the constant rate asked for (rate mode only)",
        lambda t: t.rate,
        None,
    ),
    (
        "stackrace_engine_cpu_ratio",
        "CPU of the target's engine processes over the last interval, in cores",
        lambda t: t.interval.engine_cpu / 100,
        "ratio",
    ),
    (
        "stackrace_engine_saturated",
        "1 when an engine process of the target ran near 100 % of its core",
        lambda t: int(t.saturated),
        None,
    ),
]
_STACK_GAUGES: list[tuple[str, str, Callable[[ResourceSample], float | int], str | None]] = [
    (
        "stackrace_stack_resident_memory_bytes",
        "resident memory (RSS) of the stack's process tree",
        lambda r: r.rss,
        "bytes",
    ),
    (
        "stackrace_stack_unique_memory_bytes",
        "unique memory (USS) of the stack's process tree: pages no other process shares",
        lambda r: r.uss,
        "bytes",
    ),
    (
        "stackrace_stack_cpu_ratio",
        "CPU of the stack's process tree at the last sample, in cores",
        lambda r: r.cpu_percent / 100,
        "ratio",
    ),
    (
        "stackrace_stack_processes",
        "processes in the stack's tree",
        lambda r: r.processes,
        None,
    ),
]


def _kinds(failures: Mapping[str, int]) -> list[str]:
    # every known kind (a dashboard's query finds a 0 rather than nothing), then others
    return [*FAILURE_KINDS, *sorted(k for k in failures if k not in FAILURE_KINDS)]


Labels = dict[str, str]


class _Families:
    """Writes metric families: metadata, then samples, OpenMetrics-escaped."""

    def __init__(self, out: list[str]) -> None:
        self.out = out

    def _meta(self, name: str, kind: str, help_text: str, unit: str | None) -> None:
        self.out.append(f"# TYPE {name} {kind}\n")
        if unit:
            self.out.append(f"# UNIT {name} {unit}\n")
        self.out.append(f"# HELP {name} {_escape(help_text)}\n")

    def add(
        self,
        name: str,
        kind: str,
        help_text: str,
        samples: Iterable[tuple[Labels, float | int]],
        unit: str | None = None,
    ) -> None:
        rows = list(samples)
        if not rows:
            return
        self._meta(name, kind, help_text, unit)
        suffix = {"counter": "_total", "info": "_info"}.get(kind, "")
        for labels, value in rows:
            self.out.append(f"{name}{suffix}{_labels(labels)} {_number(value)}\n")

    def histogram(
        self, name: str, help_text: str, rows: list[tuple[Labels, TargetFigures]]
    ) -> None:
        if not rows:
            return
        self._meta(name, "histogram", help_text, "seconds")
        for labels, f in rows:
            upto = 0
            for bound, n in zip(BUCKETS_US, f.buckets, strict=False):
                upto += n
                le = _number(bound / 1e6)
                self.out.append(f"{name}_bucket{_labels({**labels, 'le': le})} {upto}\n")
            total = upto + f.buckets[-1]
            self.out.append(f"{name}_bucket{_labels({**labels, 'le': '+Inf'})} {total}\n")
            self.out.append(f"{name}_count{_labels(labels)} {total}\n")
            self.out.append(f"{name}_sum{_labels(labels)} {_number(f.latency_sum)}\n")


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_label_value(v)}"' for k, v in labels.items())
    return "{" + inner + "}"


def _label_value(value: str) -> str:
    return _escape(value).replace('"', '\\"')


def _number(value: float | int) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    return repr(float(value))
