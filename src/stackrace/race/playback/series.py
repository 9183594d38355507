"""A recording's series: the race second by second, read from its file (`replay --html`).

A recording keeps every engine interval (its `tick`s: counts, failures, waiting, the
oldest wait, each member's resources) and, once a second per target, the running
level's latency histogram (`hist`). The counts are added up by the same `SecondsAdder`
as a live race's (race/core/series.py). A second's latencies are the difference between
two running histograms, exact; where the running histogram started again (a new level:
a count went down) the new one is all the level has measured, and the part of the
second before the change, which no record kept, is left out. Percentiles over time are
still merged histograms, never averages. A recording that kept no histogram for a member
gives it no latency columns: empty, never zeros that would read as instant.
"""

from __future__ import annotations

from stackrace.engine.histogram import SparseHistogram
from stackrace.race.core.series import SecondsAdder
from stackrace.race.playback.recording import Hist, Recording, Tick
from stackrace.report.series import StackSeries


def recording_series(recording: Recording) -> dict[str, StackSeries]:
    """Each recorded member's series, by member id."""
    adder = SecondsAdder()
    last: dict[str, dict[int, int]] = {}
    for record in recording.records:
        if isinstance(record, Tick) and record.snap is not None:
            for t in record.snap.targets:
                mt = record.members.get(t.id)
                adder.add(record.t, t, None, mt.resources if mt is not None else None)
        elif isinstance(record, Hist):
            now = dict(zip(record.pairs[::2], record.pairs[1::2], strict=False))
            before = last.get(record.target, {})
            if any(c < before.get(i, 0) for i, c in now.items()) or sum(now.values()) < sum(
                before.values()
            ):
                before = {}  # the running histogram started again: a new level
            diff = SparseHistogram()
            for i, c in now.items():
                if c > before.get(i, 0):
                    diff.counts[i] = c - before.get(i, 0)
            last[record.target] = now
            adder.add_hist(record.t, record.target, diff)
    adder.flush()
    out = {}
    for member_id in adder.rows:
        s = adder.result(member_id, latency=member_id in last)
        if s is not None:
            out[member_id] = s
    return out
