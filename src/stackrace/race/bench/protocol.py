"""Bench's level protocol: how one level of the members is measured, on the race core.

    runner = LevelRunner(core, plan, progress)
    levels = await runner.level(["uvicorn", "gunicorn-sync"], 200)   # {id: Level}

- closed loop: set the concurrency, warm up (time, then optionally a number of answered
  requests), restart the totals on an interval boundary, measure `duration`;
- `--requests N` (as ab -n): warm up, drain until nothing is in flight, then send
  exactly N spread over the connections and wait until every one was answered or failed
  (each is bounded by the request timeout, never by `duration`); req/s is timed from the
  first send to the last answer;
- `--rate R`: one level at R req/s per stack;
- `--repeat N`: N independent rounds. Round 1 is the ladder (levels in order, the
  breaking point's evidence captured there); rounds 2 … N measure the levels round 1
  measured again, each round in its own shuffled order (c=10 c=50 c=20, then c=50 c=10
  c=20: `more_rounds`), each a fresh measurement: nothing left in flight, the level
  set, the full warm-up. A level's rounds are added into one window
  (engine/window_sum.py) and each round's req/s is a sample, whose spread is the
  level's interval (rules/confidence.estimate, the function tune uses). Repeats in a
  row with the load going on (what `--repeat` once did) share one minute of the
  machine, and their range read as a reproducibility they did not have; rounds a
  whole ladder apart carry the machine's drift between them, which the next run meets.
  A fresh warm-up rather than a fresh server start per round: the server's warm state
  (its pools, caches, a JIT) is what a deploy runs with, a start-up costs seconds per
  stack and round, and a cold start's first seconds are a different measurement.

Each level keeps the engine's complete accounting (answered, failed by kind, waiting),
the Little's-law check, the engine's share of the latency, the stack's CPU (and CPU
time per request), memory before and after, whether the database was down, and its
fastest answer since the level was set (warm-up included: the service time's
estimate, stackrace.rules.level).

Every wait and every reading of time goes through the core's clock (race/core/clock.py), so
the protocol runs unchanged on the synthetic engine, whose clock is its steps: its
rules are unit-tested there in milliseconds (tests/unit/test_bench_levels.py). The
whole run (groups, stacks started and stopped, URLs) is race/bench/driver.py; the report
it fills, race/bench/results.py.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from stackrace.db.watch import DbWatch
from stackrace.engine.histogram import LatencyHistogram
from stackrace.engine.model import WindowStats
from stackrace.engine.window_sum import WindowSum
from stackrace.race.core import budget
from stackrace.race.core.capacity_plan import CapacityPlan
from stackrace.race.core.core import RaceCore
from stackrace.race.core.journal import Journal, Resumed
from stackrace.race.core.noise import NoiseMeter
from stackrace.race.core.state import StackState
from stackrace.race.core.urls import UrlTarget
from stackrace.report.schema import (
    Level,
    LittleLaw,
    Memory,
    ProbeSlice,
)
from stackrace.rules import accounting
from stackrace.rules.engine import engine_limit, engine_share
from stackrace.settings.race_settings import RaceSettings
from stackrace.stacks.definition import Stack
from stackrace.stacks.sampler import ResourceSample

Progress = Callable[[str], None]
# seconds between looks at the stacks' accept queues while a level is measured (one dump
# of the machine's sockets each, off the event loop: ~1 ms, ~30 ms with 30,000 sockets)
_QUEUE_EVERY = 1.0
# a level's window under this share of its duration once the duration has passed: the
# engines' reports came late, and the level is measured on until they cover it (the
# windows end on report boundaries, 250 ms apart: a share, not the whole duration)
SHORT_WINDOW = 0.75


@dataclass
class BenchPlan:
    stacks: list[Stack]
    settings: RaceSettings
    preset: str | None = None
    db_env: dict[str, str] = field(default_factory=dict)
    # set when the workload uses a database: a level measured while it was down is marked
    # (and not judged), and no stack is started against a dead database
    database: DbWatch | None = None
    stacks_file: str | None = None
    # called with the race core as soon as it is made, before any stack starts: a front
    # end that watches the race live (`--metrics`: stackrace.metrics) follows its engine
    on_core: Callable[[RaceCore], None] | None = None
    # servers the user started (--url): raced after the stacks, in the same groups, never
    # started, pinned or stopped by us
    urls: list[UrlTarget] = field(default_factory=list)
    allow_remote: bool = False  # --url off loopback (checked again by the engine)
    # `bench --capacity`: instead of the levels, search each stack's capacity under the
    # SLO (race/bench/capacity_driver.py); the result goes to StackResult.capacity
    capacity: CapacityPlan | None = None
    # every finished level and probe is appended here as it ends (race/core/journal.py)
    journal: Journal | None = None
    # a journal read back (`bench --resume`): what is measured already is not again
    resume: Resumed | None = None
    # how busy the machine is around each probe (race/core/noise.py); None: not measured
    noise: NoiseMeter | None = None

    @property
    def members(self) -> int:
        """Stacks and --url servers: what is placed, grouped and raced."""
        return len(self.stacks) + len(self.urls)


class _Acc:
    """One level of one stack across its rounds."""

    def __init__(self) -> None:
        self.windows: list[WindowStats] = []  # each round's (its rps is a sample)
        self.sum = WindowSum()  # the rounds as one window (engine/window_sum.py)
        self.hist: LatencyHistogram | None = None
        self.hist_unc: LatencyHistogram | None = None
        self.cpu: list[float] = []
        self.cpu_us: list[float] = []
        self.wait: list[float] = []
        self.engine_cpu: list[float] = []
        self.saturated = False
        self.procs = 1  # engine processes carrying it
        self.db_down = False
        self.fastest_us: int | None = None  # its fastest answer, warm-up included
        self.queue: list[int] = []  # its accept queue, once a second while measured


class LevelRunner:
    """Measures levels of the members it is given, on one RaceCore."""

    def __init__(self, core: RaceCore, plan: BenchPlan, progress: Progress) -> None:
        self.core = core
        self.plan = plan
        self.s = plan.settings
        self.progress = progress
        self.losses_told = 0  # engine hosts lost, already in the progress
        self.fastest: dict[str, int] = {}  # per member: since its level was set
        self._seen_seq = -1  # the last snapshot read (each interval is read once)
        # a probe's own time series, per member, while it is measured; the last probe's
        self.slices: dict[str, list[ProbeSlice]] = {}
        self.last_slices: dict[str, list[ProbeSlice]] = {}
        # each level's rounds so far (its members' accumulators, memory before it)
        self.rounds: dict[int, tuple[dict[str, _Acc], dict[str, ResourceSample | None]]] = {}
        # per member: its accept queue, seen once a second while a level is measured
        self.queues: dict[str, list[int]] = {}

    def _see(self) -> None:
        """Read the latest interval's fastest answers, and a probe's intervals
        (wherever the protocol waits)."""
        snap = self.core.engine.latest
        if snap is None or snap.seq == self._seen_seq:
            return
        self._seen_seq = snap.seq
        for t in snap.targets:
            lat = t.interval.latency
            if lat.count and (t.id not in self.fastest or lat.min < self.fastest[t.id]):
                self.fastest[t.id] = lat.min
            if t.id in self.slices:  # a probe under way: its own time series
                self.slices[t.id].append(
                    ProbeSlice(lat.count, lat.p50, lat.p90, lat.p99, lat.p999, lat.max,
                               t.interval.goodput)
                )  # fmt: skip

    async def _sleep(self, seconds: float) -> None:
        """Wait `seconds`, reading every interval on the way."""
        end = self.core.clock() + seconds
        while (left := end - self.core.clock()) > 0:
            await self.core.clock.sleep(min(self.core.interval, left))
            self._see()

    async def next_interval(self) -> None:
        """Wait for the engine's next snapshot (a fresh interval boundary)."""
        if await self.core.next_interval():
            self.tell_losses()
            self._see()

    def tell_losses(self) -> None:
        """A load host lost (a cluster's): say so the moment it is known."""
        snap = self.core.engine.latest
        lost = snap.lost if snap is not None else []
        for loss in lost[self.losses_told :]:
            self.progress(f"! {loss.describe()}; the run goes on")
        self.losses_told = len(lost)

    def _crashed(self, ids: list[str]) -> list[str]:
        return [
            i
            for i in ids
            if self.core.members[i].handle.state in (StackState.CRASHED, StackState.STOPPED)
        ]

    async def _set_level(self, ids: list[str], level: int) -> None:
        for i in ids:
            self.fastest.pop(i, None)  # a new level: its own fastest answer
        await self.core.set_level(level, ids)

    async def _warm(self, ids: list[str], full: bool = True) -> None:
        await self._sleep(0.3)  # connections open, retired ones drain
        if not full:
            return
        if self.s.warmup > 0:
            await self._sleep(self.s.warmup)
        if self.s.warmup_requests > 0:
            # a JIT warms with requests, not seconds: go on until each stack has
            # answered this many (bounded: a stack too slow for it stops at the timeout)
            self.core.reset_totals(0.0, ids)
            await self.next_interval()
            end = self.core.clock() + max(60.0, self.s.timeout * 6)
            while self.core.clock() < end:
                await self._sleep(self.core.interval)
                if all(
                    (t := self.core.target(i)) is None or t.total.requests >= self.s.warmup_requests
                    for i in ids
                ):
                    break
                if self._crashed(ids):
                    return

    async def drain(self, ids: list[str]) -> None:
        """Stop sending and wait until nothing is in flight (at most the timeout)."""
        await budget.drain(self.core, ids, self.s.timeout, self.next_interval)

    async def _measure_budget(self, ids: list[str]) -> None:
        # the load goes on meanwhile: nothing in flight, then exactly N (race/core/budget.py)
        await self.drain(ids)
        await self.next_interval()
        self.core.reset_totals(0.0, ids)
        await self.core.set_budget(self.s.requests or 0, ids)
        ended = await budget.spent(
            self.core,
            ids,
            self.s.requests or 0,
            self.s.timeout,
            wait=lambda: self._sleep(self.core.interval),
            stop=lambda: bool(self._crashed(ids)),
        )
        if not ended:
            self.progress("  no answer or failure for longer than the timeout: level ends")
        await self.next_interval()  # the last answers reach the totals
        await self.core.set_budget(None, ids)

    async def _measure_time(self, ids: list[str]) -> None:
        await self.next_interval()
        self.core.reset_totals(0.0, ids)
        end = self.core.clock() + self.s.duration
        looked = float("-inf")
        while self.core.clock() < end:
            await self.core.clock.sleep(min(self.core.interval, max(0.0, end - self.core.clock())))
            self._see()
            if self.core.clock() - looked >= _QUEUE_EVERY:
                # the server's own evidence of a queue (rules/level.py held_at_the_door)
                looked = self.core.clock()
                for i, n in (await self.core.accept_queues(ids)).items():
                    self.queues.setdefault(i, []).append(n)
            self.tell_losses()
            if self._crashed(ids):
                break
        await self.next_interval()  # the last interval reaches the totals
        # a level measures what it says: when the engines' reports came late (a busy
        # machine, a remote host: a cluster bench beside ./dev test's other lanes once
        # closed a 1 s level on a window of 0.0 s, 4 requests carried in and none
        # answered), the load goes on until their windows cover the duration, for at
        # most the request timeout more; a window still short is said by its seconds
        late_end = self.core.clock() + self.s.timeout
        while self._short(ids) and self.core.clock() < late_end and not self._crashed(ids):
            await self.next_interval()

    def _short(self, ids: list[str]) -> bool:
        """Some member's measured window covers under `SHORT_WINDOW` of the duration."""
        least = SHORT_WINDOW * self.s.duration
        return any((t := self.core.target(i)) is not None and t.total.seconds < least for i in ids)

    async def level(self, ids: list[str], level: int) -> dict[str, Level]:
        """A level's first round (its only one without `--repeat`): set, warm up,
        measure. What it measured is kept for `more_rounds`."""
        accs = {i: _Acc() for i in ids}
        before = {i: self.core.sample_now(i) for i in ids}
        live = [i for i in ids if i not in self._crashed(ids)]
        if live:
            await self._set_level(live, level)
            await self._warm(live)
            await self._measure_round(live, accs)
        self.rounds[level] = (accs, before)
        return self._levels(ids, level, accs, before)

    async def more_rounds(
        self, measured: dict[int, list[str]], seed: int
    ) -> dict[int, dict[str, Level]]:
        """Rounds 2 … `repeat` of the levels round 1 measured (level → the members
        measured there), the levels in an order shuffled each round (from `seed`), each
        a fresh measurement (module docstring); each level's rounds as one Level."""
        rng = random.Random(seed)
        levels = sorted(measured)
        for r in range(2, self.s.repeat + 1):
            order = list(levels)
            rng.shuffle(order)
            self.progress(f"round {r} of {self.s.repeat}: " + " ".join(f"{lv:,}" for lv in order))
            for level in order:
                ids = measured[level]
                live = [i for i in ids if i not in self._crashed(ids)]
                if not live:
                    continue
                # fresh: nothing of the level before in flight, then set and warmed up
                await self.drain(live)
                await self.core.set_budget(None, live)
                await self._set_level(live, level)
                await self._warm(live)
                await self._measure_round(live, self.rounds[level][0])
        out = {}
        for level in levels:
            accs, before = self.rounds[level]
            out[level] = self._levels(measured[level], level, accs, before)
        return out

    async def _measure_round(self, live: list[str], accs: dict[str, _Acc]) -> None:
        started = self.core.clock()
        if self.s.requests and self.s.rate is None:
            await self._measure_budget(live)
        else:
            await self._measure_time(live)
        watch = self.plan.database
        down = watch is not None and bool(watch.down_during(started, self.core.clock()))
        for i in live:
            self._take(i, accs[i], down)

    def _take(self, i: str, a: _Acc, down: bool) -> None:
        """Add the measured window of member `i` (its totals, histograms, CPU) to `a`."""
        t = self.core.target(i)
        if t is None:
            return
        snap = self.core.engine.latest
        a.windows.append(t.total)
        h = self.core.engine.total_histogram(i)
        if a.hist is None:
            a.hist = h
        else:
            a.hist.add(h)
        if self.s.rate is not None:
            hu = self.core.engine.total_histogram(i, uncorrected=True)
            if a.hist_unc is None:
                a.hist_unc = hu
            else:
                a.hist_unc.add(hu)
        # from the second round on, the latencies are the merged histograms'
        merged = a.sum.parts > 0
        a.sum.add(
            t.total,
            a.hist.summary() if merged else None,
            a.hist_unc.summary()
            if merged and a.hist_unc is not None and t.total.latency_uncorrected
            else None,
        )
        res = self.core.sample_now(i)
        if res is not None:
            a.cpu.append(res.cpu_percent)
            a.wait.append(res.cpu_wait_percent)
        per = self.core.cpu_per_request_us(i, t.total.requests)
        if per is not None:
            a.cpu_us.append(per)
        a.engine_cpu.append(t.total.engine_cpu)
        a.saturated |= t.saturated or bool(snap and snap.saturated and snap.procs == 1)
        a.procs = t.procs
        self._see()
        lat = t.total.latency
        seen = (self.fastest.get(i), lat.min if lat.count else None, a.fastest_us)
        a.fastest_us = min((f for f in seen if f is not None), default=None)
        a.db_down |= down
        a.queue.extend(self.queues.pop(i, []))

    def _levels(
        self,
        ids: list[str],
        level: float | dict[str, float],
        accs: dict[str, _Acc],
        before: dict[str, ResourceSample | None],
    ) -> dict[str, Level]:
        out: dict[str, Level] = {}
        for i in ids:
            a = accs[i]
            if not a.windows:
                continue
            window = a.sum.stats()
            after = self.core.members[i].resources or before[i]
            load = level[i] if isinstance(level, dict) else level
            out[i] = self._level(load, window, a, before[i], after)
        return out

    async def probe(
        self,
        loads: dict[str, float],
        needed: int,
        min_s: float,
        max_s: float,
        longest_s: float | None = None,
        undecided: Callable[[str], bool] | None = None,
    ) -> dict[str, Level]:
        """One probe of a capacity search (race/bench/capacity_driver.py) for each member at its
        own load, all at once: set each load, warm up, then measure until every member
        has `needed` answers (and at least `min_s`), or `max_s` has passed. A member
        that is then still `undecided` (too few answers for its percentile, and nothing
        missed yet) keeps the probe going until it has them or `longest_s` has passed:
        a verdict on too few answers is a guess. A level is returned per member
        measured (a crashed one has none)."""
        ids = list(loads)
        before = {i: self.core.sample_now(i) for i in ids}

        # all at once first (a rate opens its connections once, core.set_rate), then
        # each member at its own load; connections are whole, a rate as asked
        def asked(load: float) -> int:
            return load if self.s.rate is not None else round(load)  # type: ignore[return-value]  # a rate is a float the setter takes as it is

        await self._set_level(ids, asked(min(loads.values())))
        for i, load in loads.items():
            await self._set_level([i], asked(load))
        await self._warm(ids)
        clock = self.core.clock
        started = clock()
        await self.next_interval()
        self.core.reset_totals(0.0, ids)
        # every interval from here to the end is the probe's own time series
        self.slices = {i: [] for i in ids}
        t0 = clock()
        longest = max(max_s, longest_s or max_s)
        while clock() - t0 < longest:
            await self._sleep(self.core.interval)
            if self._crashed(ids):
                break
            took = clock() - t0
            short = [
                i
                for i in ids
                if (t := self.core.target(i)) is not None and t.total.requests < needed
            ]
            if took >= min_s and not short:
                break
            if took >= max_s and (undecided is None or not any(undecided(i) for i in short)):
                break
        await self.next_interval()  # the last interval reaches the totals
        self.last_slices, self.slices = self.slices, {}
        watch = self.plan.database
        down = watch is not None and bool(watch.down_during(started, clock()))
        accs = {i: _Acc() for i in ids}
        for i in ids:
            if i not in self._crashed(ids):
                self._take(i, accs[i], down)
        return self._levels(ids, loads, accs, before)

    def _level(
        self,
        level: float,
        window: WindowStats,
        a: _Acc,
        before: ResourceSample | None,
        after: ResourceSample | None,
    ) -> Level:
        s = self.s
        rate_mode = s.rate is not None
        check = None
        if not rate_mode:
            check = accounting.little_check(window, round(level), budget=bool(s.requests))
        share = engine_share(window)
        limit = engine_limit(window, a.saturated, a.procs)
        return Level(
            concurrency=0 if rate_mode else round(level),
            rate=float(level) if rate_mode else None,
            window=window,
            memory_before=Memory(rss=before.rss, uss=before.uss) if before else Memory(),
            memory_after=Memory(rss=after.rss, uss=after.uss) if after else Memory(),
            cpu_percent=statistics.median(a.cpu) if a.cpu else 0.0,
            engine_cpu=statistics.median(a.engine_cpu) if a.engine_cpu else 0.0,
            engine_saturated=a.saturated,
            hdr=a.hist.encode_base64() if a.hist is not None else "",
            samples=[w.goodput for w in a.windows],
            cpu_us_per_request=statistics.median(a.cpu_us) if a.cpu_us else None,
            cpu_wait_percent=statistics.median(a.wait) if a.wait else 0.0,
            engine_share=share,
            engine_limited=bool(limit),
            engine_limit=limit,
            little=LittleLaw(
                check.connections, check.in_flight, check.explained, check.ok, check.reason
            )
            if check
            else None,
            db_down=a.db_down,
            keepalive=s.keepalive,
            fastest_us=a.fastest_us,
            # the median second's: a line that held, not one moment's
            accept_queue=round(statistics.median(a.queue)) if a.queue else None,
        )
