"""A stack's run second by second: the `series` of a run file, its encoding and its CSV.

Levels say how a stack did at each load; the series says what happened in between —
the second p99 climbed, the second failures began, memory that grew level after level.
One row a second (`step`), columns rather than records, because the file is read by
programs (`jq '.stacks[0].series.p99'`) and a column of numbers is a third the size of
as many objects.

**Exact percentiles.** Each row keeps the latency histogram of its second, in the
engine's HdrHistogram layout (engine/histogram.py), so the percentiles of any span of
seconds are those of the merged histograms (`merged`), never an average of the
seconds' percentiles (which says nothing: the p99 of two seconds is not the mean of
their p99s). `p50`…`max` are derived from those histograms when the row is made and
kept beside them for readers without a decoder.

**The histograms' encoding** (`hist`, SERIES_FORMAT 1): base64 of zlib of a stream of
unsigned LEB128 varints: for each row, the number of non-empty slots, then for each
slot (ascending) the gap from the previous slot of that row (from slot 0 for the
first) and its count. Compressed together, a second of a few hundred slots costs a few
dozen bytes: a 10-minute 6-stack run's histograms are some 100 KB of JSON (bench/
html_report_size.py), where one V2 "HISTFAAA" string per second would be several times
that. `decode_hist` reads it back; a file's series whose row counts disagree is refused.
"""

from __future__ import annotations

import base64
import csv
import io
import re
import zlib
from collections.abc import Iterable, Sequence

import msgspec

from stackrace.engine.histogram import SparseHistogram, highest_equivalent

SERIES_FORMAT = 1  # the encoding of `hist` and the columns' meaning; readers check it
PERCENTILES = (50.0, 90.0, 99.0, 99.9)


class StackSeries(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One stack, one row a second from its first load to its last (the run's clock).

    Latencies in µs; 0 in a row that answered nothing (no sample, not "fast"). `cpu`
    is the stack's whole process tree in % of one core and `rss` its resident memory
    in bytes, as last sampled in that second (0 before its first sample; both columns
    empty when it was never sampled: a --url without --pid). `failures` maps a kind
    (timeout, refused, 5xx…) to its count in each second."""

    format: int = SERIES_FORMAT
    step: float = 1.0  # seconds a row covers
    t: list[float] = []  # seconds since the run began, at each row's end
    level: list[int] = []  # the load asked of it: connections, or req/s in rate mode
    goodput: list[float] = []  # answers that count, a second (WindowStats.goodput)
    answered: list[int] = []  # complete responses, any status
    failures: dict[str, list[int]] = {}
    p50: list[int] = []
    p90: list[int] = []
    p99: list[int] = []
    p999: list[int] = []
    max: list[int] = []
    waiting: list[int] = []  # requests sent and not answered at the row's end
    oldest_us: list[int] = []  # the oldest waiting request's age, the most in the row
    cpu: list[float] = []
    rss: list[int] = []
    hist: str = ""  # every row's latency histogram (module docstring)

    def __len__(self) -> int:
        return len(self.t)

    def failed(self, row: int) -> int:
        return sum(counts[row] for counts in self.failures.values())


class SeriesRow(msgspec.Struct):
    """One second of one stack, closed (race/core/series.py): its histogram already
    encoded and its percentiles taken, so an hour of rows holds a few KB each, not a
    dict of slots each (`row`)."""

    t: float
    level: int
    goodput: float
    answered: int
    failures: dict[str, int]
    latency: tuple[int, int, int, int, int]  # p50, p90, p99, p99.9, max (µs)
    hist: bytes  # the row's part of `hist` (encode_row), not yet compressed
    waiting: int
    oldest_us: int
    cpu: float | None  # None: no sample yet (or never: not sampled)
    rss: int | None


def row(
    t: float, level: int, goodput: float, answered: int, failures: dict[str, int],
    hist: SparseHistogram, waiting: int, oldest_us: int, cpu: float | None, rss: int | None,
) -> SeriesRow:  # fmt: skip
    """A closed second: its histogram's percentiles, and the histogram encoded."""
    p50, p90, p99, p999 = hist.percentiles(PERCENTILES)
    top = highest_equivalent(max(hist.counts)) if hist.counts else 0
    return SeriesRow(
        t, level, goodput, answered, failures, (p50, p90, p99, p999, top), encode_row(hist),
        waiting, oldest_us, cpu, rss,
    )  # fmt: skip


def build(rows: Sequence[SeriesRow], step: float = 1.0, latency: bool = True) -> StackSeries:
    """The columns of these rows; `latency` False: no histogram was kept (a recording
    without them), so the latency columns and `hist` stay empty rather than read 0."""
    kinds = sorted({k for r in rows for k, n in r.failures.items() if n})
    s = StackSeries(step=step, failures={k: [] for k in kinds})
    for r in rows:
        s.t.append(round(r.t, 2))
        s.level.append(r.level)
        s.goodput.append(round(r.goodput, 1))
        s.answered.append(r.answered)
        for k in kinds:
            s.failures[k].append(r.failures.get(k, 0))
        if latency:
            for col, v in zip((s.p50, s.p90, s.p99, s.p999, s.max), r.latency, strict=True):
                col.append(v)
        s.waiting.append(r.waiting)
        s.oldest_us.append(r.oldest_us)
    if any(r.rss is not None for r in rows):
        s.cpu = [round(r.cpu or 0.0, 1) for r in rows]
        s.rss = [r.rss or 0 for r in rows]
    s.hist = _pack(b"".join(r.hist for r in rows)) if latency else ""
    return s


# --- the histograms' encoding -----------------------------------------------------------


def _put(out: bytearray, v: int) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def encode_row(h: SparseHistogram) -> bytes:
    """One row's histogram as varints: its slot count, then each slot's gap and count."""
    out = bytearray()
    slots = sorted(i for i, c in h.counts.items() if c)
    _put(out, len(slots))
    prev = 0
    for i in slots:
        _put(out, i - prev)
        _put(out, h.counts[i])
        prev = i
    return bytes(out)


def encode_hist(hists: Iterable[SparseHistogram]) -> str:
    """Rows' histograms as a series' `hist`."""
    return _pack(b"".join(encode_row(h) for h in hists))


def _pack(raw: bytes) -> str:
    return base64.b64encode(zlib.compress(raw, 9)).decode("ascii")


def decode_hist(text: str, rows: int, source: str = "series") -> list[SparseHistogram]:
    """The rows' histograms; ValueError naming `source` when the text is not one."""
    try:
        raw = zlib.decompress(base64.b64decode(text.encode("ascii"), validate=True))
    except (ValueError, zlib.error) as exc:
        raise ValueError(f"{source}: hist is not a series encoding ({exc})") from None
    out: list[SparseHistogram] = []
    pos = 0

    def get() -> int:
        nonlocal pos
        v = shift = 0
        while True:
            if pos >= len(raw):
                raise ValueError(f"{source}: hist ends inside a row")
            b = raw[pos]
            pos += 1
            v |= (b & 0x7F) << shift
            if b < 0x80:
                return v
            shift += 7

    while pos < len(raw):
        h = SparseHistogram()
        slot = 0
        for _ in range(get()):
            slot += get()
            h.counts[slot] = get()
        out.append(h)
    if len(out) != rows:
        raise ValueError(f"{source}: hist holds {len(out)} rows, the series {rows}")
    return out


def merged(series: StackSeries, first: int, last: int) -> SparseHistogram:
    """Rows first..last (inclusive) as one histogram: exact percentiles over a span."""
    total = SparseHistogram()
    for h in decode_hist(series.hist, len(series))[first : last + 1]:
        total.add(h)
    return total


def check(series: StackSeries, source: str) -> str | None:
    """Why a read series cannot be used (None: it can): another format, columns of
    different lengths, a histogram blob that does not hold its rows."""
    if series.format != SERIES_FORMAT:
        return f"{source}: series format {series.format}, this stackrace reads {SERIES_FORMAT}"
    n = len(series.t)
    columns = {
        name: getattr(series, name)
        for name in ("level", "goodput", "answered", "waiting", "oldest_us")
    }
    if series.hist or any((series.p50, series.p90, series.p99, series.p999, series.max)):
        # all empty: no latency histogram was kept (a recording without them)
        columns.update(
            p50=series.p50, p90=series.p90, p99=series.p99, p999=series.p999, max=series.max
        )
    if series.cpu or series.rss:  # both empty: never sampled
        columns.update(cpu=series.cpu, rss=series.rss)
    columns.update({f"failures.{k}": v for k, v in series.failures.items()})
    for name, col in columns.items():
        if len(col) != n:
            return f"{source}: series column {name} has {len(col)} rows, t has {n}"
    if series.hist:
        try:
            decode_hist(series.hist, n, source)
        except ValueError as exc:
            return str(exc)
    return None


# --- in the run file ---------------------------------------------------------------------

# An array of numbers that spans lines, as msgspec's indent writes every array. A JSON
# string never holds a raw newline, so no string can match.
_NUMBER_LINES = re.compile(rb"\[\n[0-9eE+\-., \n]*\n *\]")


def one_line_columns(text: bytes) -> bytes:
    """Indented JSON with each array of numbers on one line (schema.dumps): a series is
    a column a second, mostly indentation when each number has a line of its own."""
    return _NUMBER_LINES.sub(
        lambda m: b"[" + b",".join(x.strip() for x in m.group(0)[1:-1].split(b",")) + b"]", text
    )


# --- the CSV --------------------------------------------------------------------------

CSV_COLUMNS = (
    "stack", "t", "level", "goodput", "answered", "failures", "failures_by_kind",
    "p50_us", "p90_us", "p99_us", "p999_us", "max_us", "waiting", "oldest_us",
    "cpu_percent", "rss_bytes",
)  # fmt: skip


def to_csv(stacks: Iterable[tuple[str, StackSeries]]) -> str:
    """One row per stack per second, for people who plot elsewhere; failures by kind
    as `kind=n;kind=n` so the columns are the same for every run."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(CSV_COLUMNS)
    for name, s in stacks:
        for i in range(len(s)):
            kinds = ";".join(f"{k}={v[i]}" for k, v in s.failures.items() if v[i])
            # no answer, no latency: empty cells, as the level CSV's (a 0 reads as instant)
            known = s.answered[i] and s.p99
            lat = [s.p50[i], s.p90[i], s.p99[i], s.p999[i], s.max[i]] if known else [""] * 5
            w.writerow(
                [
                    name, f"{s.t[i]:g}", s.level[i], f"{s.goodput[i]:g}", s.answered[i],
                    s.failed(i), kinds, *lat, s.waiting[i], s.oldest_us[i],
                    f"{s.cpu[i]:g}" if s.cpu else "", s.rss[i] if s.rss else "",
                ]
            )  # fmt: skip
    return buf.getvalue()
