"""`stackrace load`'s latency histogram, as a person reads it and as HdrHistogram does.

    buckets(hist)                  # a few round bounds, 1-2-5 per decade, and their counts

A summary's histogram has round bounds from the fastest answer to the slowest, so a
wide tail shows as rows of its own rather than as one long last bar (oha's linear
buckets put a 2 s tail and a 200 µs body in eleven equal slices, ten of them empty).
(The whole histogram, as HdrHistogram's interval log, is report/load_text.py's `hdr_log`:
a text made of the document, beside the summary.)
"""

from __future__ import annotations

import math

import msgspec

from stackrace.engine.histogram import LatencyHistogram, median_equivalent


class LatencyBucket(msgspec.Struct):
    """Answers whose latency was at most `le_us` (and above the bucket before)."""

    le_us: int
    count: int


MAX_BUCKETS = 10
_NICE = (1, 2, 5)  # bounds 1-2-5 per decade: 100µs, 200µs, 500µs, 1ms, …


def buckets(hist: LatencyHistogram) -> list[LatencyBucket]:
    """The answers by latency in a few buckets whose bounds are round (1-2-5 per decade,
    or one per decade when that takes more than `MAX_BUCKETS`), from the fastest answer's
    to the slowest's: a wide tail shows as its own rows, not as one long last bar."""
    counts = hist.counts
    values = [(median_equivalent(i), counts[i]) for i in hist.nonzero()]
    if not values:
        return []
    lo, hi = values[0][0], values[-1][0]
    bounds = _bounds(lo, hi, _NICE)
    if len(bounds) > MAX_BUCKETS:
        bounds = _bounds(lo, hi, (1,))
    out = [LatencyBucket(le_us=b, count=0) for b in bounds]
    k = 0
    for value, n in values:
        while k < len(out) - 1 and value > out[k].le_us:
            k += 1
        out[k].count += n
    return out


def _bounds(lo: int, hi: int, steps: tuple[int, ...]) -> list[int]:
    """Round bounds from the first at or above `lo` to the first at or above `hi`."""
    decade = 10 ** max(0, math.floor(math.log10(max(1, lo))))
    out: list[int] = []
    while not out or out[-1] < hi:
        for s in steps:
            b = s * decade
            if b >= lo and (not out or b > out[-1]):
                out.append(b)
            if out and out[-1] >= hi:
                break
        decade *= 10
    return out
