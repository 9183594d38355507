"""The run second by second: every interval the engine publishes, added into one row
a second per member (report/series.py holds the rows' format).

    series = SeriesRecorder(core)          # watches core.engine from now on
    ...                                    # the race runs
    result.series = series.result("uvicorn")

The engine calls `interval` as it publishes each interval (Engine.watch_intervals), so
no interval is missed or counted twice whatever the driver is doing — bench's level
protocol polls `engine.latest` and may skip one, the recorder may not. The adding up is
`SecondsAdder`'s, which a recording's playback feeds too (race/playback/series.py): an
interval belongs to the second in which it ends; a second's histogram is its
intervals' histograms merged (exact), its goodput the answers that count over the
intervals' time, its waiting the gauge at its end, its oldest wait the largest seen in
it; CPU and memory are the member's latest resource sample then (the core samples each
member once a second: race/core/core.py).

Warm-up and the pauses between levels are recorded as well: they are part of what
happened (a level's first seconds are often where a server struggles); the level table
keeps the measured windows, the series the whole timeline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from stackrace.engine.histogram import SparseHistogram
from stackrace.engine.model import EngineSnapshot, TargetSnapshot
from stackrace.race.core.core import RaceCore
from stackrace.report.series import SeriesRow, StackSeries, build, row
from stackrace.stacks.sampler import ResourceSample


@dataclass
class _Second:
    """The second being added up for one member."""

    index: int
    level: int = 0
    ok: int = 0
    answered: int = 0
    seconds: float = 0.0
    failures: dict[str, int] = field(default_factory=dict)
    hist: SparseHistogram = field(default_factory=SparseHistogram)
    waiting: int = 0
    oldest_us: int = 0
    resources: ResourceSample | None = None


class SecondsAdder:
    """Intervals in, one closed row a second per member out (`rows`)."""

    def __init__(self, step: float = 1.0) -> None:
        self.step = step
        self.rows: dict[str, list[SeriesRow]] = {}
        self._open: dict[str, _Second] = {}

    def _second(self, member_id: str, now: float) -> _Second:
        index = int(now // self.step)
        cur = self._open.get(member_id)
        if cur is not None and cur.index != index:
            self._close(member_id, cur)
            cur = None
        if cur is None:
            cur = self._open[member_id] = _Second(index)
        return cur

    def add(
        self,
        now: float,
        t: TargetSnapshot,
        hist: SparseHistogram | None,
        resources: ResourceSample | None,
    ) -> None:
        """One target's interval ending at `now` (seconds on the race's clock)."""
        cur = self._second(t.id, now)
        w = t.interval
        cur.level = t.level
        cur.ok += w.ok
        cur.answered += w.requests
        cur.seconds += w.span_seconds or w.seconds
        for kind, n in w.failures.items():
            cur.failures[kind] = cur.failures.get(kind, 0) + n
        if hist is not None:
            cur.hist.add(hist)
        cur.waiting = w.waiting
        cur.oldest_us = max(cur.oldest_us, w.oldest_wait_us)
        cur.resources = resources or cur.resources

    def add_hist(self, now: float, member_id: str, hist: SparseHistogram) -> None:
        """Latency counts of the second at `now` that came apart from its intervals."""
        self._second(member_id, now).hist.add(hist)

    def _close(self, member_id: str, sec: _Second) -> None:
        res = sec.resources  # None: not sampled (a --url without --pid), or not yet
        self.rows.setdefault(member_id, []).append(
            row(
                t=(sec.index + 1) * self.step,
                level=sec.level,
                goodput=sec.ok / sec.seconds if sec.seconds > 0 else 0.0,
                answered=sec.answered,
                failures=sec.failures,
                hist=sec.hist,
                waiting=sec.waiting,
                oldest_us=sec.oldest_us,
                cpu=res.cpu_percent if res is not None else None,
                rss=res.rss if res is not None else None,
            )
        )

    def flush(self) -> None:
        """Close the seconds still open (the race ended inside them)."""
        for member_id, sec in self._open.items():
            self._close(member_id, sec)
        self._open.clear()

    def result(self, member_id: str, latency: bool = True) -> StackSeries | None:
        """The member's series (None: it was never loaded); `latency` False: no
        histogram came for it (report/series.py `build`)."""
        rows = self.rows.get(member_id)
        return build(rows, self.step, latency) if rows else None


class SeriesRecorder(SecondsAdder):
    """One row a second per member of the core's race, from each published interval."""

    def __init__(self, core: RaceCore, step: float = 1.0) -> None:
        super().__init__(step)
        self.core = core
        self.t0 = core.clock()
        core.engine.watch_intervals(self.interval)

    def interval(self, snap: EngineSnapshot, hists: Mapping[str, SparseHistogram]) -> None:
        now = self.core.clock() - self.t0
        for t in snap.targets:
            m = self.core.members.get(t.id)
            self.add(now, t, hists.get(t.id), m.resources if m is not None else None)
