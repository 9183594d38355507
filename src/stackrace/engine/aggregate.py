"""Merging engine-process reports into per-target interval and running figures."""

from __future__ import annotations

from stackrace.engine.channel import TargetReport
from stackrace.engine.histogram import SparseHistogram
from stackrace.engine.model import TargetSnapshot, TargetSpec, WindowStats


def _add_counts(into: dict, more: dict) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


class WindowAccumulator:
    """Counts and histograms over a window; `stats()` turns them into WindowStats."""

    __slots__ = (
        "bytes",
        "errors",
        "failures",
        "hist",
        "hist_unc",
        "late",
        "ok",
        "requests",
        "seconds",
        "status",
        "uses_rate",
    )

    def __init__(self) -> None:
        self.hist = SparseHistogram()
        self.hist_unc = SparseHistogram()
        self.reset()

    def reset(self) -> None:
        self.seconds = 0.0
        self.requests = 0
        self.ok = 0
        self.bytes = 0
        self.late = 0
        self.failures: dict[str, int] = {}
        self.status: dict[int, int] = {}
        self.errors: dict[str, int] = {}
        self.uses_rate = False
        self.hist.clear()
        self.hist_unc.clear()

    def add_report(self, r: TargetReport) -> None:
        self.requests += r.requests
        self.ok += r.ok
        self.bytes += r.bytes
        self.late += r.late
        _add_counts(self.failures, r.failures)
        _add_counts(self.status, r.status)
        _add_counts(self.errors, r.errors)
        self.hist.add_sparse(r.hist)
        if r.hist_unc is not None:
            self.uses_rate = True
            self.hist_unc.add_sparse(r.hist_unc)

    def add_window(self, other: WindowAccumulator) -> None:
        self.seconds += other.seconds
        self.requests += other.requests
        self.ok += other.ok
        self.bytes += other.bytes
        self.late += other.late
        _add_counts(self.failures, other.failures)
        _add_counts(self.status, other.status)
        _add_counts(self.errors, other.errors)
        self.hist.add(other.hist)
        if other.uses_rate:
            self.uses_rate = True
            self.hist_unc.add(other.hist_unc)

    def stats(self) -> WindowStats:
        secs = self.seconds
        return WindowStats(
            seconds=secs,
            requests=self.requests,
            ok=self.ok,
            rps=self.requests / secs if secs > 0 else 0.0,
            bytes=self.bytes,
            failures=dict(self.failures),
            status=dict(self.status),
            latency=self.hist.summary(),
            latency_uncorrected=self.hist_unc.summary() if self.uses_rate else None,
            late=self.late,
        )


class TargetAggregate:
    """Everything the driver knows about one target across all engine processes."""

    def __init__(self, spec: TargetSpec) -> None:
        self.spec = spec
        self.concurrency = spec.concurrency
        self.rate = spec.rate
        self.open = 0
        self.interval = WindowAccumulator()
        self.total = WindowAccumulator()

    def begin_interval(self, seconds: float) -> None:
        self.interval.reset()
        self.interval.seconds = seconds
        self.open = 0

    def add_report(self, r: TargetReport) -> None:
        self.interval.add_report(r)
        self.open += r.open

    def end_interval(self, counting: bool) -> TargetSnapshot:
        if counting:
            self.total.add_window(self.interval)
        return TargetSnapshot(
            id=self.spec.id,
            url=self.spec.url,
            concurrency=self.concurrency,
            connections=self.open,
            rate=self.rate,
            interval=self.interval.stats(),
            total=self.total.stats(),
        )
