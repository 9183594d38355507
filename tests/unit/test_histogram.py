import random

import pytest
from hdrh.histogram import HdrHistogram

from stackrace.engine._cycle import slot, tally
from stackrace.engine.histogram import (
    COUNTS_LEN,
    HIGHEST,
    LatencyHistogram,
    SparseHistogram,
    highest_equivalent,
    index_of,
    lowest_equivalent,
)


def lognormal_values(n: int, seed: int = 7) -> list[int]:
    rnd = random.Random(seed)
    return [int(rnd.lognormvariate(9, 1.6)) for _ in range(n)]


def test_layout_matches_hdrhistogram():
    ref = HdrHistogram(1, HIGHEST, 3)
    assert ref.counts_len == COUNTS_LEN
    ours = LatencyHistogram()
    for v in lognormal_values(50_000):
        ours.record(v)
        ref.record_value(v)
    assert ours.counts == list(ref.counts[:COUNTS_LEN])
    for p in (50, 90, 99, 99.9, 100):
        assert ours.value_at_percentile(p) == ref.get_value_at_percentile(p)


def test_hdr_tools_read_our_encoding_and_we_read_theirs():
    ours = LatencyHistogram()
    for v in lognormal_values(20_000):
        ours.record(v)
    encoded = ours.encode_base64()
    assert encoded.startswith("HISTFAAA")
    theirs = HdrHistogram.decode(encoded)
    assert theirs.get_total_count() == 20_000
    assert theirs.get_value_at_percentile(99) == ours.value_at_percentile(99)
    back = LatencyHistogram.decode(theirs.encode())
    assert back.counts == ours.counts
    assert LatencyHistogram.decode(encoded).counts == ours.counts


@pytest.mark.parametrize("value", [0, 1, 999, 2047, 2048, 20_000, 1_234_567, 60_000_000, HIGHEST])
def test_relative_error_within_a_tenth_of_a_percent(value):
    i = index_of(value)
    lo, hi = lowest_equivalent(i), highest_equivalent(i)
    assert lo <= value <= hi
    assert hi - lo <= max(0, value) / 1000 + 1  # 3 significant digits
    # microsecond resolution below 2 ms
    if value < 2048:
        assert lo == hi == value


def test_the_hot_paths_c_slot_and_tally_are_index_of():
    # engine/_cycle.c records every answer's latency (connection.py count_answer): the
    # same slot as index_of(ns // 1000), clamps included, on every bucket's edges
    edges = [(1 << b) + d for b in range(40) for d in (-1, 0, 1)]
    times_ns = [0, -5, 1, 999, 1000, 2_047_999, 2_048_000, HIGHEST * 1000, HIGHEST * 1000 + 1]
    times_ns += [e * 1000 + r for e in edges for r in (0, 999)] + [10**18]
    rnd = random.Random(3)
    times_ns += [rnd.randrange(10**13) for _ in range(20_000)]
    for ns in times_ns:
        assert slot(ns) == index_of(ns // 1000), ns
    counts = [0] * COUNTS_LEN
    for ns in (5_000, 5_999, 5_000_000):
        tally(counts, ns)
    assert counts[index_of(5)] == 2 and counts[index_of(5_000)] == 1 and sum(counts) == 3
    with pytest.raises(IndexError):
        tally([0] * 10, HIGHEST * 1000)


def test_values_beyond_an_hour_are_clamped_not_lost():
    h = LatencyHistogram()
    h.record(10 * HIGHEST)
    assert h.total == 1
    assert h.summary().max >= HIGHEST


def test_sparse_round_trip_and_merge():
    a, b = LatencyHistogram(), LatencyHistogram()
    for v in lognormal_values(1000, 1):
        a.record(v)
    for v in lognormal_values(1000, 2):
        b.record(v)
    merged = LatencyHistogram()
    merged.add(a)
    merged.add(b)
    via_sparse = LatencyHistogram()
    via_sparse.add_sparse(a.take_sparse())
    via_sparse.add_sparse(b.take_sparse())
    assert via_sparse.counts == merged.counts
    assert a.total == 0 and b.total == 0  # take_sparse empties


def test_summary_figures():
    h = LatencyHistogram()
    for v in range(1, 1001):
        h.record(v)
    s = h.summary()
    assert s.count == 1000
    assert (s.p50, s.p90, s.p99, s.p999, s.max, s.min) == (500, 900, 990, 999, 1000, 1)
    assert s.mean == pytest.approx(500.5, rel=0.01)
    assert LatencyHistogram().summary().count == 0


def test_take_sparse_with_expected_count_finds_everything():
    h = LatencyHistogram()
    values = [5, 5, 3000, 20_000, 20_001, 9_000_000]
    for v in values:
        h.record(v)
    ref = LatencyHistogram()
    for v in values:
        ref.record(v)
    pairs = h.take_sparse(len(values))
    assert sum(pairs[1::2]) == len(values)
    assert h.total == 0
    back = LatencyHistogram()
    back.add_sparse(pairs)
    assert back.counts == ref.counts
    assert h.take_sparse(0) == []


def test_sparse_histogram_matches_dense():
    dense = LatencyHistogram()
    for v in lognormal_values(5000, 3):
        dense.record(v)
    sparse = SparseHistogram()
    sparse.add_sparse(dense.take_sparse())
    for v in lognormal_values(5000, 3):
        dense.record(v)
    assert sparse.summary() == dense.summary()
    assert sparse.to_dense().counts == dense.counts
    assert sparse.percentiles([50, 99]) == [
        dense.value_at_percentile(50),
        dense.value_at_percentile(99),
    ]


def test_the_median_table_is_median_equivalent_of_every_slot() -> None:
    # built a bucket at a time for start-up's sake: it must be the per-slot formula
    from stackrace.engine import histogram

    table = histogram._median_table()
    assert len(table) == histogram.COUNTS_LEN
    assert table == [histogram.median_equivalent(i) for i in range(histogram.COUNTS_LEN)]
