"""Merging engine-process reports into per-target interval and running figures.

Counts add up exactly across processes; `waiting` is a gauge (the latest report of each
process), and a window's `carried_in` is the waiting gauge when the window began, so
every window keeps sent == answered + lost + waiting (see model.py). Finished windows
are added up in time order by stackrace.engine.window_sum, one rule per figure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from stackrace.engine.channel import TargetReport
from stackrace.engine.histogram import SparseHistogram, lowest_equivalent
from stackrace.engine.model import (
    ABANDONED,
    STARVED_MIN_US,
    EngineSnapshot,
    KindStats,
    TargetSnapshot,
    TargetSpec,
    WindowStats,
    starved_limit_us,
)

# what a watcher of every interval is given (Engine.watch_intervals): the snapshot, and
# each target's latency histogram of that interval alone, from its aggregate below
IntervalWatcher = Callable[[EngineSnapshot, Mapping[str, SparseHistogram]], None]

SATURATED_CPU = 90.0  # percent of one core: a single-threaded engine near its ceiling


def _add_counts(into: dict[Any, int], more: dict[Any, int]) -> None:  # status or name
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def add_kinds(
    into: list[KindStats] | None, more: list[KindStats] | None, gauges: bool = True
) -> list[KindStats] | None:
    """Per-kind figures (a target's mix) added up; `waiting` is a gauge: summed over
    processes (`gauges`), or replaced by the later window's (gauges=False on windows
    in time order is not this: see add_window)."""
    if more is None:
        return into
    if into is None:
        into = [KindStats() for _ in more]
    for a, b in zip(into, more, strict=False):
        a.sent += b.sent
        a.answered += b.answered
        a.errors += b.errors
        a.failed += b.failed
        if gauges:
            a.waiting += b.waiting
        _add_counts(a.status, b.status)
    return into


def copy_kinds(kinds: list[KindStats] | None) -> list[KindStats] | None:
    if kinds is None:
        return None
    return [
        KindStats(k.sent, k.answered, k.errors, k.failed, k.waiting, dict(k.status)) for k in kinds
    ]


# A window's figures by how they add up, named once for every way they are added (a
# process's report into an interval, an interval into the running totals, a silent
# process's last gauges carried): counts add up across processes and across intervals;
# gauges describe the window's end, so they add up across processes (each holds its
# share of what is in flight) and an interval's replace the totals' (the latest is the
# present); the first five are the requests in flight, which a process that sent no
# report still holds (TargetAggregate.carry).
_COUNTS = (
    "requests",
    "ok",
    "bytes",
    "late",
    "unsolicited",
    "handshakes",
    "resumed",
    "goaways",
    "resets",
    "refused",
)
_IN_FLIGHT = ("waiting", "unsent", "connecting", "handshaking", "unacked")
_GAUGES = (*_IN_FLIGHT, "streams_open", "stalled_connections")


def _add(into: object, more: object, names: tuple[str, ...]) -> None:
    """`more`'s figures of `names` added to `into`'s."""
    for name in names:
        setattr(into, name, getattr(into, name) + getattr(more, name))


def _smallest(a: int, b: int) -> int:
    """The smaller of two SETTINGS_MAX_CONCURRENT_STREAMS, 0 meaning none seen."""
    return min(a, b) if a and b else a or b


class WindowAccumulator:
    """Counts and histograms over a window; `stats()` turns them into WindowStats."""

    __slots__ = (
        "budget_t0",
        "bytes",
        "carried_in",
        "connect",
        "connecting",
        "cpu",
        "cpu_runs",
        "cpu_wait",
        "errors",
        "failures",
        "first_byte",
        "goaways",
        "handshakes",
        "handshaking",
        "hist",
        "hist_unc",
        "http",
        "inflight_n",
        "inflight_sum",
        "kinds",
        "lag",
        "last_done",
        "late",
        "max_streams",
        "ok",
        "opened",
        "refused",
        "requests",
        "resets",
        "resumed",
        "seconds",
        "send_lateness",
        "sent",
        "stalled_connections",
        "starved_max",
        "starved_us",
        "status",
        "streams_open",
        "tls",
        "unacked",
        "unsent",
        "unsolicited",
        "uses_rate",
        "waiting",
        "waiting_ages",
    )
    # set by reset(), added up by the tables above
    requests: int
    ok: int
    bytes: int
    late: int
    unsolicited: int
    handshakes: int
    resumed: int
    goaways: int
    resets: int
    refused: int
    waiting: int
    unsent: int
    connecting: int
    handshaking: int
    unacked: int
    streams_open: int
    stalled_connections: int

    def __init__(self) -> None:
        self.hist = SparseHistogram()
        self.hist_unc = SparseHistogram()
        self.lag = SparseHistogram()
        self.waiting_ages = SparseHistogram()
        self.connect = SparseHistogram()
        self.tls = SparseHistogram()
        self.first_byte = SparseHistogram()
        self.send_lateness = SparseHistogram()
        self.reset()

    def reset(self, carried_in: int = 0) -> None:
        self.opened = False  # no interval added yet (totals: carried_in still to be set)
        self.seconds = 0.0
        self.cpu = 0.0  # engine CPU seconds of the processes carrying the target
        self.cpu_wait = 0.0  # seconds they were runnable but waited for a CPU
        self.cpu_runs = 0  # times they were put on a CPU
        for name in (*_COUNTS, *_GAUGES):
            setattr(self, name, 0)
        self.sent = carried_in
        self.carried_in = carried_in
        self.waiting = carried_in
        self.budget_t0 = 0
        self.last_done = 0
        self.inflight_sum = 0
        self.inflight_n = 0  # samples per process, summed over processes
        self.failures: dict[str, int] = {}
        self.status: dict[int, int] = {}
        self.errors: dict[str, int] = {}
        self.kinds: list[KindStats] | None = None
        self.uses_rate = False
        self.http = "1.1"
        self.max_streams = 0
        self.starved_us = 0.0  # clients × µs waiting past the starved limit (sampled)
        self.starved_max = 0  # the oldest such wait seen
        self.hist.clear()
        self.hist_unc.clear()
        self.lag.clear()
        self.waiting_ages.clear()
        self.connect.clear()
        self.tls.clear()
        self.first_byte.clear()
        self.send_lateness.clear()

    def add_report(self, r: TargetReport, gauges: bool = True) -> None:
        """One process's report for this interval. Gauges (waiting) are summed over
        processes; `gauges=False` for a process's earlier reports when several arrive
        at once (only its latest describes the present)."""
        self.sent += r.sent
        _add(self, r, _COUNTS)
        if gauges:
            _add(self, r, _GAUGES)
            self.waiting_ages.add_sparse(r.waiting_ages)
        self.inflight_sum += r.inflight_sum
        self.inflight_n = max(self.inflight_n, r.inflight_samples)
        _add_counts(self.failures, r.failures)
        _add_counts(self.status, r.status)
        _add_counts(self.errors, r.errors)
        self.kinds = add_kinds(self.kinds, r.kinds, gauges)
        self.hist.add_sparse(r.hist)
        self.lag.add_sparse(r.lag)
        self.http = r.http
        self.max_streams = _smallest(self.max_streams, r.max_streams)
        if r.connect_times:
            self.connect.add_sparse(r.connect_times)
        if r.tls_times:
            self.tls.add_sparse(r.tls_times)
        if r.first_byte_times:
            self.first_byte.add_sparse(r.first_byte_times)
        if r.send_lateness:
            self.send_lateness.add_sparse(r.send_lateness)
        if r.hist_unc is not None:
            self.uses_rate = True
            self.hist_unc.add_sparse(r.hist_unc)
        if r.budget_t0:
            self.budget_t0 = min(self.budget_t0 or r.budget_t0, r.budget_t0)
        self.last_done = max(self.last_done, r.last_done)

    def add_window(self, other: WindowAccumulator) -> None:
        """Append an interval to these running figures."""
        if not self.opened:
            self.opened = True
            self.carried_in = other.carried_in
            self.sent = other.carried_in
        self.seconds += other.seconds
        self.cpu += other.cpu
        self.cpu_wait += other.cpu_wait
        self.cpu_runs += other.cpu_runs
        self.sent += other.sent - other.carried_in
        _add(self, other, _COUNTS)
        self.inflight_sum += other.inflight_sum
        self.inflight_n += other.inflight_n
        _add_counts(self.failures, other.failures)
        _add_counts(self.status, other.status)
        _add_counts(self.errors, other.errors)
        if other.kinds is not None:
            self.kinds = add_kinds(self.kinds, other.kinds, gauges=False)
            for mine, latest in zip(self.kinds or [], other.kinds, strict=False):
                mine.waiting = latest.waiting  # a gauge: the latest interval's
        self.hist.add(other.hist)
        self.lag.add(other.lag)
        self.starved_us += other.starved_us
        self.starved_max = max(self.starved_max, other.starved_max)
        self.http = other.http
        self.max_streams = _smallest(self.max_streams, other.max_streams)
        self.connect.add(other.connect)
        self.tls.add(other.tls)
        self.first_byte.add(other.first_byte)
        self.send_lateness.add(other.send_lateness)
        if other.uses_rate:
            self.uses_rate = True
            self.hist_unc.add(other.hist_unc)
        for name in _GAUGES:  # the latest interval's
            setattr(self, name, getattr(other, name))
        self.waiting_ages.counts = dict(other.waiting_ages.counts)
        if other.budget_t0:
            self.budget_t0 = min(self.budget_t0 or other.budget_t0, other.budget_t0)
        self.last_done = max(self.last_done, other.last_done)

    def _stale(self) -> int:
        """Waiting requests older than the window: they got no answer at all in it."""
        limit = self.seconds * 1e6
        return sum(c for i, c in self.waiting_ages.counts.items() if lowest_equivalent(i) >= limit)

    def sample_starved(self, answered_p99_us: int) -> tuple[float, int]:
        """At the end of an interval: the requests waiting past the starved limit
        (model.starved_limit_us) count as starved for the whole interval. Summed over
        intervals this is the clients' time spent starved, from the moment each wait
        passed the limit (the first second or so of each starved wait is left out: a
        lower bound). Returns (client-µs, oldest starved wait) for the interval."""
        limit = starved_limit_us(answered_p99_us)
        n, oldest = 0, 0
        for i, c in self.waiting_ages.counts.items():
            age = lowest_equivalent(i)
            if age >= limit:
                n += c
                oldest = max(oldest, age)
        return n * self.seconds * 1e6, oldest

    def add_starved(self, client_us: float, oldest: int) -> None:
        self.starved_us += client_us
        self.starved_max = max(self.starved_max, oldest)

    def _starved_share(self) -> float:
        client_us = (
            self.inflight_sum / self.inflight_n * self.seconds * 1e6 if self.inflight_n else 0
        )
        if not self.requests or client_us <= 0:
            return 0.0
        return min(1.0, self.starved_us / client_us)

    def stats(self) -> WindowStats:
        secs = self.seconds
        span = None
        if self.budget_t0 and self.last_done > self.budget_t0:
            span = (self.last_done - self.budget_t0) / 1e9
        ages = self.waiting_ages
        timed = span if span else secs
        starved_share = self._starved_share()
        return WindowStats(
            seconds=secs,
            sent=self.sent,
            carried_in=self.carried_in,
            waiting=self.waiting,
            unsent=self.unsent,
            connecting=self.connecting,
            handshaking=self.handshaking,
            unacked=self.unacked,
            oldest_wait_us=ages.summary().max if ages.counts else 0,
            stale=self._stale() if ages.counts else 0,
            starved_share=starved_share,
            starved_wait_us=self.starved_max if starved_share else 0,
            requests=self.requests,
            ok=self.ok,
            rps=self.requests / timed if timed > 0 else 0.0,
            bytes=self.bytes,
            failures=dict(self.failures),
            status=dict(self.status),
            errors=dict(self.errors),
            latency=self.hist.summary(),
            latency_uncorrected=self.hist_unc.summary() if self.uses_rate else None,
            late=self.late,
            lag=self.lag.summary(),
            engine_cpu=100.0 * self.cpu / secs if secs > 0 else 0.0,
            engine_wait=100.0 * self.cpu_wait / secs if secs > 0 else 0.0,
            engine_wait_us=1e6 * self.cpu_wait / self.cpu_runs if self.cpu_runs else 0.0,
            span_seconds=span,
            # processes sample at the same pace: the sum over processes of each one's
            # average is the target's average
            in_flight=self.inflight_sum / self.inflight_n if self.inflight_n else 0.0,
            kinds=copy_kinds(self.kinds),
            unsolicited=self.unsolicited,
            connect=self.connect.summary() if self.connect.counts else None,
            tls=self.tls.summary() if self.tls.counts else None,
            first_byte=self.first_byte.summary() if self.first_byte.counts else None,
            send_lateness=self.send_lateness.summary() if self.send_lateness.counts else None,
            handshakes=self.handshakes,
            resumed=self.resumed,
            http=self.http,
            streams_open=self.streams_open,
            stalled_connections=self.stalled_connections,
            goaways=self.goaways,
            resets=self.resets,
            refused=self.refused,
            max_streams=self.max_streams,
        )


class TargetAggregate:
    """Everything the driver knows about one target across all engine processes."""

    def __init__(self, spec: TargetSpec) -> None:
        self.spec = spec
        self.concurrency = spec.concurrency
        self.rate = spec.rate
        self.open = 0
        self.procs = 0
        self.cpu_max = 0.0
        # processes accounted for this interval without a report of theirs (late: last
        # gauges carried; lost: abandoned)
        self.carried = 0
        self.interval = WindowAccumulator()
        self.total = WindowAccumulator()
        self._waiting = 0  # the gauge at the end of the last interval
        # a mix: each kind since the target was added, whatever the totals' restarts
        self.kinds_run: list[KindStats] | None = None

    def begin_interval(self) -> None:
        self.interval.reset(carried_in=self._waiting)
        self.interval.waiting = 0  # summed from this interval's reports
        self.open = 0
        self.procs = 0
        self.carried = 0
        self.cpu_max = 0.0

    def carry(self, last: TargetReport) -> None:
        """A process that sent no report this interval (late: its host is slow or
        silent): what it had in flight is still in flight, as of its last report, so
        the window keeps sent == answered + lost + waiting."""
        _add(self.interval, last, _IN_FLIGHT)
        self.interval.waiting_ages.add_sparse(last.waiting_ages)
        self.open += last.open
        self.carried += 1

    def abandon(self, n: int) -> None:
        """A lost process's requests in flight at its last report: failed, `abandoned`
        (no answer will ever reach us); they leave the waiting gauge."""
        self.carried += 1
        if n > 0:
            _add_counts(self.interval.failures, {ABANDONED: n})

    def add_report(
        self,
        r: TargetReport,
        seconds: float,
        cpu: float,
        latest: bool,
        wait: float = 0.0,
        runs: int = 0,
    ) -> None:
        """A report of one engine process; `latest`: its last one of this interval (the
        others, when a process sent several, carry counts but no current gauges)."""
        self.interval.add_report(r, gauges=latest)
        self.interval.cpu += cpu
        self.interval.cpu_wait += wait
        self.interval.cpu_runs += runs
        if latest:
            self.interval.seconds = max(self.interval.seconds, seconds)
            if seconds > 0:
                self.cpu_max = max(self.cpu_max, 100.0 * cpu / seconds)
            self.open += r.open
            self.procs += 1

    def reset_total(self) -> None:
        self.total.reset(carried_in=self._waiting)

    def end_interval(self, counting: bool) -> TargetSnapshot:
        if self.procs == 0 and self.carried == 0:
            # no process reported this target (it is being added): nothing changed
            self.interval.waiting = self._waiting
        self._waiting = self.interval.waiting
        if counting:
            self.total.add_window(self.interval)
        # starved: waiting far past what this level's answers took (the total's p99,
        # so an interval with few answers is judged against the level)
        answered = self.total if counting and self.total.requests else self.interval
        ages = self.interval.waiting_ages.counts
        # the bucket index grows with the age: the largest one says whether any waiting
        # request is even a second old, before the level's p99 is worked out (4 Hz)
        if answered.requests and ages and lowest_equivalent(max(ages)) >= STARVED_MIN_US:
            client_us, oldest = self.interval.sample_starved(answered.hist.value_at_percentile(99))
            self.interval.add_starved(client_us, oldest)
            if counting:
                self.total.add_starved(client_us, oldest)
        if self.interval.kinds is not None:
            self.kinds_run = add_kinds(self.kinds_run, self.interval.kinds, gauges=False)
            for mine, latest in zip(self.kinds_run or [], self.interval.kinds, strict=False):
                mine.waiting = latest.waiting
        return TargetSnapshot(
            id=self.spec.id,
            url=self.spec.url,
            concurrency=self.concurrency,
            connections=self.open,
            rate=self.rate,
            interval=self.interval.stats(),
            total=self.total.stats(),
            keepalive=self.spec.keepalive,
            procs=self.procs,
            saturated=self.cpu_max >= SATURATED_CPU,
            kinds_run=copy_kinds(self.kinds_run),
        )
