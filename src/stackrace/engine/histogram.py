"""A latency histogram with HdrHistogram's bucket layout, and its standard encoding.

Values are integer microseconds from 1 µs to one hour with three significant digits
(at most 0.1% relative error; buckets are 1 µs wide below 2,048 µs and 16 µs wide at
20 ms). The counts array has exactly the layout of an HdrHistogram built with
lowest=1, highest=3,600,000,000, significant digits=3, so a run can be exported in the
standard V2 compressed encoding ("HISTFAAA…") and read by any HdrHistogram tool.

The engine's hot path records with engine/_cycle.c's `tally` and `slot`, the same
arithmetic in C (connection.py `count_answer`); tests/unit/test_histogram.py holds them
equal to `index_of`.
"""

from __future__ import annotations

import base64
import struct
import zlib
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from itertools import accumulate, compress
from operator import mul

from stackrace.engine.model import LatencySummary

SIGNIFICANT_DIGITS = 3
LOWEST = 1
HIGHEST = 3_600_000_000  # one hour in µs
SUB_BUCKET_COUNT_MAGNITUDE = 11  # ceil(log2(2 * 10**3))
SUB_BUCKET_HALF_COUNT_MAGNITUDE = SUB_BUCKET_COUNT_MAGNITUDE - 1
SUB_BUCKET_HALF_COUNT = 1 << SUB_BUCKET_HALF_COUNT_MAGNITUDE  # 1024
SUB_BUCKET_MASK = (1 << SUB_BUCKET_COUNT_MAGNITUDE) - 1  # 2047


def _buckets_needed(value: int) -> int:
    smallest_untrackable = 1 << SUB_BUCKET_COUNT_MAGNITUDE
    needed = 1
    while smallest_untrackable <= value:
        smallest_untrackable <<= 1
        needed += 1
    return needed


BUCKET_COUNT = _buckets_needed(HIGHEST)
COUNTS_LEN = (BUCKET_COUNT + 1) * SUB_BUCKET_HALF_COUNT  # 23,552 slots, fixed

_V2_COOKIE = 0x1C849303 | 0x10
_V2_COMPRESSED_COOKIE = 0x1C849304 | 0x10
_HEADER = struct.Struct(">iiiiqqd")


def index_of(value: int) -> int:
    """Counts-array index of a value (clamped into [0, HIGHEST])."""
    if value > HIGHEST:
        value = HIGHEST
    elif value < 0:
        value = 0
    b = (value | SUB_BUCKET_MASK).bit_length() - SUB_BUCKET_COUNT_MAGNITUDE
    return (b << SUB_BUCKET_HALF_COUNT_MAGNITUDE) + (value >> b)


def lowest_equivalent(index: int) -> int:
    bucket = (index >> SUB_BUCKET_HALF_COUNT_MAGNITUDE) - 1
    sub = (index & (SUB_BUCKET_HALF_COUNT - 1)) + SUB_BUCKET_HALF_COUNT
    if bucket < 0:
        sub -= SUB_BUCKET_HALF_COUNT
        bucket = 0
    return sub << bucket


def highest_equivalent(index: int) -> int:
    """The largest value that lands in this slot (what HdrHistogram reports)."""
    bucket = max((index >> SUB_BUCKET_HALF_COUNT_MAGNITUDE) - 1, 0)
    return lowest_equivalent(index) + (1 << bucket) - 1


def median_equivalent(index: int) -> int:
    bucket = max((index >> SUB_BUCKET_HALF_COUNT_MAGNITUDE) - 1, 0)
    return lowest_equivalent(index) + ((1 << bucket) >> 1)


_BLOCK = SUB_BUCKET_HALF_COUNT
_ZERO_BLOCK = [0] * _BLOCK
_MEDIANS: list[int] = []


def _median_table() -> list[int]:
    """`median_equivalent` of every slot. Built on first use (the engine process never
    needs it), a bucket at a time: the first bucket's slots hold one value each, a later
    bucket b's slot s (SUB_BUCKET_HALF_COUNT <= s < 2 x that) the values from s << b on.
    A call per slot took ~18 ms, a third of the driver's CPU in `load -n 1`; this ~1.5 ms
    (tests/unit/test_histogram.py checks the table against `median_equivalent`)."""
    if not _MEDIANS:
        half = SUB_BUCKET_HALF_COUNT
        _MEDIANS.extend(range(2 * half))
        b = 1
        while len(_MEDIANS) < COUNTS_LEN:
            mid = (1 << b) >> 1
            _MEDIANS.extend([(s << b) + mid for s in range(half, 2 * half)])
            b += 1
        del _MEDIANS[COUNTS_LEN:]
    return _MEDIANS


_ZEROS = [0] * COUNTS_LEN


class LatencyHistogram:
    """Fixed-size counts array; `counts[index_of(v)] += 1` records a value."""

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts: list[int] = [0] * COUNTS_LEN

    def record(self, value: int, count: int = 1) -> None:
        self.counts[index_of(value)] += count

    def nonzero(self) -> list[int]:
        """Indices with a count, ascending."""
        return _nonzero(self.counts)

    @property
    def total(self) -> int:
        return sum(self.counts)

    def clear(self) -> None:
        self.counts[:] = _ZEROS

    def take_sparse(self, expected: int | None = None) -> list[int]:
        """Return [index, count, index, count, …] and reset to empty (one interval's data).

        `expected` is the number of values recorded, when the caller knows it: the scan
        stops as soon as they are all found, so a typical interval reads a few blocks.
        """
        counts = self.counts
        out: list[int] = []
        if expected == 0:
            return out
        left = -1 if expected is None else expected
        for start in range(0, COUNTS_LEN, _BLOCK):
            block = counts[start : start + _BLOCK]
            if block == _ZERO_BLOCK:
                continue
            for i in compress(range(start, start + _BLOCK), block):
                c = counts[i]
                out.append(i)
                out.append(c)
                counts[i] = 0
                left -= c
            if left == 0:
                break
        return out

    def add_sparse(self, pairs: Sequence[int]) -> None:
        counts = self.counts
        for j in range(0, len(pairs), 2):
            counts[pairs[j]] += pairs[j + 1]

    def add(self, other: LatencyHistogram) -> None:
        counts = self.counts
        oc = other.counts
        for i in _nonzero(oc):
            counts[i] += oc[i]

    def value_at_percentile(self, percentile: float) -> int:
        return summarize(self, (percentile,))[0]

    def summary(self) -> LatencySummary:
        idx = self.nonzero()
        counts = self.counts
        return summary_of(idx, [counts[i] for i in idx])

    def percentile_curve(self, points: Iterable[float]) -> list[tuple[float, int]]:
        pts = list(points)
        return list(zip(pts, summarize(self, pts), strict=True))

    # --- HdrHistogram V2 encoding -------------------------------------------------

    def encode(self) -> bytes:
        """The V2 compressed encoding, as HdrHistogram's encodeIntoCompressedByteBuffer."""
        # walked over the slots that hold counts (a run of zeros between them is one
        # entry: 0 for one slot, -n for n), not over every slot up to the last: `load`
        # encodes its total at the end of every run, and a slot-by-slot walk was ~10 ms
        payload = bytearray()
        counts = self.counts
        prev = -1
        for i in self.nonzero():
            gap = i - prev - 1
            if gap:
                _put_zigzag(payload, -gap if gap > 1 else 0)
            _put_zigzag(payload, counts[i])
            prev = i
        header = _HEADER.pack(_V2_COOKIE, len(payload), 0, SIGNIFICANT_DIGITS, LOWEST, HIGHEST, 1.0)
        body = zlib.compress(header + bytes(payload))
        return struct.pack(">ii", _V2_COMPRESSED_COOKIE, len(body)) + body

    def encode_base64(self) -> str:
        return base64.b64encode(self.encode()).decode("ascii")

    @classmethod
    def decode(cls, data: bytes | str) -> LatencyHistogram:
        """Read a V2 compressed encoding made with this layout (ours or another tool's)."""
        if isinstance(data, str):
            data = data.encode("ascii")
        raw = base64.b64decode(data) if data[:4] == b"HIST" else data
        cookie, length = struct.unpack_from(">ii", raw, 0)
        if cookie != _V2_COMPRESSED_COOKIE:
            raise ValueError(f"not an HdrHistogram V2 compressed encoding (cookie {cookie:#x})")
        inner = zlib.decompress(raw[8 : 8 + length])
        cookie, plen, _offset, digits, lowest, highest, _ratio = _HEADER.unpack_from(inner, 0)
        if cookie != _V2_COOKIE:
            raise ValueError(f"unexpected inner cookie {cookie:#x}")
        if (digits, lowest) != (SIGNIFICANT_DIGITS, LOWEST) or highest > HIGHEST:
            raise ValueError(
                f"histogram layout differs (digits={digits}, lowest={lowest}, highest={highest})"
            )
        hist = cls()
        counts = hist.counts
        pos = _HEADER.size
        end = pos + plen
        i = 0
        while pos < end:
            value, pos = _get_zigzag(inner, pos)
            if value < 0:
                i += -value
            else:
                counts[i] = value
                i += 1
        return hist


def _nonzero(counts: list[int]) -> list[int]:
    # The engine calls this every interval on a 23,552-slot array, between responses:
    # it must take microseconds. Comparing a block against a block of zeros is a C loop
    # of identity checks (0 is a shared object), so empty blocks cost almost nothing;
    # only blocks with counts are scanned slot by slot.
    out: list[int] = []
    for start in range(0, COUNTS_LEN, _BLOCK):
        block = counts[start : start + _BLOCK]
        if block != _ZERO_BLOCK:
            out.extend(compress(range(start, start + _BLOCK), block))
    return out


def summarize(hist: LatencyHistogram, percentiles: Sequence[float]) -> list[int]:
    idx = hist.nonzero()
    if not idx:
        return [0] * len(percentiles)
    counts = [hist.counts[i] for i in idx]
    return _percentiles(idx, counts, sum(counts), percentiles)


def summary_of(idx: list[int], counts: list[int]) -> LatencySummary:
    """Summary of a histogram given as ascending slot indices and their counts."""
    if not idx:
        return LatencySummary()
    total = sum(counts)
    medians = _median_table()
    weighted = sum(map(mul, counts, map(medians.__getitem__, idx)))
    p50, p90, p99, p999 = _percentiles(idx, counts, total, (50.0, 90.0, 99.0, 99.9))
    return LatencySummary(
        count=total,
        mean=weighted / total,
        p50=p50,
        p90=p90,
        p99=p99,
        p999=p999,
        max=highest_equivalent(idx[-1]),
        min=lowest_equivalent(idx[0]),
    )


class SparseHistogram:
    """The same layout held as {slot: count}: what the driver keeps and merges.

    Reports arrive as sparse pairs and a run touches a few hundred slots, so a dict keeps
    merging and percentiles proportional to what was recorded, not to the 23,552 slots.
    """

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def clear(self) -> None:
        self.counts.clear()

    def add_sparse(self, pairs: Sequence[int]) -> None:
        counts = self.counts
        get = counts.get
        for j in range(0, len(pairs), 2):
            i = pairs[j]
            counts[i] = get(i, 0) + pairs[j + 1]

    def add(self, other: SparseHistogram) -> None:
        counts = self.counts
        get = counts.get
        for i, c in other.counts.items():
            counts[i] = get(i, 0) + c

    def summary(self) -> LatencySummary:
        idx = sorted(self.counts)
        return summary_of(idx, list(map(self.counts.__getitem__, idx)))

    def value_at_percentile(self, percentile: float) -> int:
        return self.percentiles((percentile,))[0]

    def percentiles(self, points: Sequence[float]) -> list[int]:
        idx = sorted(self.counts)
        if not idx:
            return [0] * len(points)
        counts = list(map(self.counts.__getitem__, idx))
        return _percentiles(idx, counts, sum(counts), points)

    def to_dense(self) -> LatencyHistogram:
        dense = LatencyHistogram()
        for i, c in self.counts.items():
            dense.counts[i] = c
        return dense

    def encode_base64(self) -> str:
        return self.to_dense().encode_base64()


def _percentiles(
    idx: list[int], counts: list[int], total: int, percentiles: Sequence[float]
) -> list[int]:
    # HdrHistogram's rule: the first slot where the running count reaches
    # round(p/100 * total), reported as the highest value of that slot (the last slot
    # when none does). The running counts are made once, in C, and each point's slot is
    # found by bisection: the driver summarizes every target's windows at 4 Hz, a total's
    # holds thousands of slots, and a walk over them in Python was most of what a
    # 5-second `load` cost its driver after start-up (bench/startup.py --load).
    running = list(accumulate(counts))
    last = len(idx) - 1
    out = []
    for p in percentiles:
        want = max(1, int(p / 100.0 * total + 0.5))
        out.append(highest_equivalent(idx[min(bisect_left(running, want), last)]))
    return out


def _put_zigzag(buf: bytearray, value: int) -> None:
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    # LEB128-64b9B: 7 bits a byte for 8 bytes, then a full 9th byte.
    for _ in range(8):
        if v < 0x80:
            buf.append(v)
            return
        buf.append((v & 0x7F) | 0x80)
        v >>= 7
    buf.append(v & 0xFF)


def _get_zigzag(buf: bytes, pos: int) -> tuple[int, int]:
    v = 0
    shift = 0
    for _ in range(8):
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    else:
        v |= buf[pos] << 56
        pos += 1
    return (v >> 1) ^ -(v & 1), pos
