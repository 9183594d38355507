"""Finished windows (`WindowStats`) added up in time order, as one window: the one
arithmetic of a window for everything above the engine — bench's repeats of a level,
the demo's running totals, the metrics' counters — with one rule per figure in
`WINDOW_RULES` (a figure added to WindowStats needs its rule here:
tests/unit/test_window_sum.py fails until it has one).

The engine's own reports are merged otherwise (stackrace.engine.aggregate: counts added
across processes, gauges as of each process's latest report); this adds windows that
are already whole, one after another.
"""

from __future__ import annotations

import msgspec

from stackrace.engine.aggregate import add_kinds, copy_kinds
from stackrace.engine.model import LatencySummary, WindowStats

# How each figure of a WindowStats combines when finished windows are added up in time
# order (WindowSum): the one table of a window's arithmetic. A figure added to
# WindowStats needs its rule here (tests/unit/test_window_sum.py fails until it has one).
SUM = "sum"  # a count: the parts add up
LAST = "last"  # a gauge, or a summary with no counts behind it: the latest part's
FIRST = "first"  # carried_in: the merged window began when its first part did
COUNTS = "counts"  # a dict of counts by key: added key by key
TIME_WEIGHTED = "time-weighted"  # an average over time: weighted by each part's seconds
LATENCY = "latency"  # percentiles of the merged histogram, which the caller holds
DERIVED = "derived"  # computed from the merged figures (see WindowSum.stats)

WINDOW_RULES: dict[str, str] = {
    "seconds": SUM,
    "sent": DERIVED,  # every part's sent, less what earlier parts still had waiting
    "carried_in": FIRST,
    "waiting": LAST,
    "unsent": LAST,
    "connecting": LAST,
    "handshaking": LAST,
    "unacked": LAST,
    "oldest_wait_us": LAST,
    "stale": LAST,
    "starved_share": TIME_WEIGHTED,
    "starved_wait_us": LAST,
    "requests": SUM,
    "ok": SUM,
    "rps": DERIVED,  # requests over the span (--requests) or the seconds
    "bytes": SUM,
    "failures": COUNTS,
    "status": COUNTS,
    "errors": COUNTS,
    "latency": LATENCY,
    "latency_uncorrected": LATENCY,
    "late": SUM,
    "lag": LAST,
    "engine_cpu": TIME_WEIGHTED,
    "engine_wait": TIME_WEIGHTED,
    "engine_wait_us": TIME_WEIGHTED,
    "span_seconds": DERIVED,  # the parts' spans added (None when no part has one)
    "in_flight": TIME_WEIGHTED,
    "kinds": DERIVED,  # each kind's counts added, its waiting the latest part's
    "unsolicited": SUM,
    "connect": LAST,
    "tls": LAST,
    "first_byte": LAST,
    "handshakes": SUM,
    "resumed": SUM,
    "send_lateness": LAST,
    "http": LAST,
    "streams_open": LAST,
    "stalled_connections": LAST,
    "goaways": SUM,
    "resets": SUM,
    "refused": SUM,
    # the smallest a server announced: a later part's is as true as an earlier one's
    "max_streams": LAST,
}


class WindowSum:
    """Finished windows (`WindowStats`) added up in time order, as one window.

    The one place a window's figures are combined outside the engine's own reports:
    bench's repeats of a level (race/bench/protocol.py), the demo's running totals
    (race/live/demo.py) and the metrics' counters (metrics/figures.py) all add windows
    here, by the rules of `WINDOW_RULES`.

    `carried_in` keeps one meaning everywhere: of `sent`, the requests already waiting
    when the window began, and a window made of parts began when its first part did, so
    it is the first part's. Requests still waiting at the end of a part are waiting at
    the start of the next one too (its `carried_in`) or were answered between the parts
    (bench's repeats have a short gap): either way the earlier part's `waiting` leaves
    `sent`, so the sum keeps sent == answered + lost + waiting, whatever the gaps.

    Latencies are percentiles, which do not add: the caller merges the parts'
    histograms and hands the merged summary with each part (without one, the latest
    part's summary stands).
    """

    __slots__ = ("_out", "_parts", "_waiting_before")

    def __init__(self) -> None:
        self._out = WindowStats()
        self._parts = 0
        self._waiting_before = 0  # waiting at the ends of the parts before the latest

    @property
    def parts(self) -> int:
        return self._parts

    def add(
        self,
        w: WindowStats,
        latency: LatencySummary | None = None,
        latency_uncorrected: LatencySummary | None = None,
    ) -> None:
        """Add the next part; `latency` (and in rate mode `latency_uncorrected`): the
        summary of every part's histogram merged, this one included."""
        out = self._out
        first = self._parts == 0
        if not first:
            self._waiting_before += out.waiting
        before = out.seconds
        for name, rule in WINDOW_RULES.items():
            value = getattr(w, name)
            if rule == SUM:
                setattr(out, name, getattr(out, name) + value)
            elif rule == LAST or (rule == FIRST and first):
                setattr(out, name, value)
            elif rule == COUNTS:
                merged = dict(getattr(out, name))
                for k, n in value.items():
                    merged[k] = merged.get(k, 0) + n
                setattr(out, name, merged)
            elif rule == TIME_WEIGHTED:
                total = before + w.seconds
                mine = getattr(out, name)
                setattr(out, name, (mine * before + value * w.seconds) / total if total else 0.0)
            elif rule == LATENCY:
                given = latency if name == "latency" else latency_uncorrected
                setattr(out, name, given if given is not None else value)
        out.sent += w.sent
        if w.span_seconds:
            out.span_seconds = (out.span_seconds or 0.0) + w.span_seconds
        if w.kinds is not None:
            out.kinds = add_kinds(copy_kinds(out.kinds), w.kinds, gauges=False)
            for mine, latest in zip(out.kinds or [], w.kinds, strict=False):
                mine.waiting = latest.waiting  # a gauge: the latest part's
        self._parts += 1

    def stats(self) -> WindowStats:
        """The parts as one window (a copy: adding more parts leaves it as it is)."""
        out = msgspec.structs.replace(
            self._out,
            failures=dict(self._out.failures),
            status=dict(self._out.status),
            errors=dict(self._out.errors),
            kinds=copy_kinds(self._out.kinds),
        )
        out.sent -= self._waiting_before
        timed = out.span_seconds or out.seconds
        out.rps = out.requests / timed if timed else 0.0
        return out
