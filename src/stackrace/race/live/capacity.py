"""The app's `k`: every stack's capacity under the SLO, searched at once, live.

    search = LiveCapacity(core, CapacityPlan("p99<50ms"), ids, start=10, rate_mode=False)
    await search.advance(core.clock())        # from Session.poll, ~4x a second
    search.status()                           # "capacity 3/… · uvicorn c=40 · …"
    search.results()                          # once search.done: one per member

The search is race/core/capacity_search.py's state machine, the verdict report/slo.py's judge with
complete accounting, and a probe needs what `bench --capacity` needs (`needed_answers`,
at least MIN_PROBE_S, at most the settings' `duration`): the same search as bench and
tune, with the same meaning of "meets".

Why a second driver and not race/bench/capacity_driver.py's `search_capacity`: that one runs as
a coroutine that sleeps on the wall clock (LevelRunner), which is right for a headless
run that owns its loop. The app's race is driven by one 4 Hz poll (Session.poll) that
also draws the panes, and its tests run on the synthetic engine stepped by hand; a
driver that sleeps would need a real clock there. So this one is a state machine
advanced by the poll on the core's clock, like the ramp: each round it sets every
member's load, lets it settle, restarts the totals (the panes then show that probe's
figures, and the slider its level), and judges each member once it has its answers.
What it records per probe is what the summary ranks: req/s, the member's memory and
its CPU per request (the same figures bench keeps for a capacity).

The machine is read around each probe as bench reads it (race/core/noise.py): other
processes' CPU and the engine's wait for a core over the probe, and each stack's own
use of and wait for a core from the samples taken while it ran. A miss the machine
disturbed is measured again, and a break starved at every miss says it is a floor,
as in bench: a demo on a laptop running a browser is the normal case. A model engine
(the synthetic one, a replay) has no processes and no machine: its probes are never
busy.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from stackrace.race.core.capacity_plan import (
    MIN_PROBE_S,
    CapacityPlan,
    at_load,
    bounds_for,
    found,
    unit,
    unsteady_of,
)
from stackrace.race.core.capacity_search import CapacitySearch, Probe, needed_answers
from stackrace.race.core.core import RaceCore
from stackrace.race.core.noise import Mark, NoiseMeter, probe_flags
from stackrace.race.core.state import StackState
from stackrace.report.schema import CapacityResult, ProbeNoise, ProbeSlice
from stackrace.report.slo import Slo

SETTLE_S = 0.5  # after a load changes: connections open, retired ones drain


@dataclass
class _Member:
    search: CapacitySearch
    load: float | None = None  # the load of the probe running now
    rss: dict[int, int] = field(default_factory=dict)  # probe index → RSS after it
    cpu_us: dict[int, float] = field(default_factory=dict)  # probe index → CPU per answer
    gone: bool = False  # crashed or stopped: its search ends where it got to
    slices: list[ProbeSlice] = field(default_factory=list)  # the probe's own intervals
    used: list[tuple[float, float]] = field(default_factory=list)  # (CPU %, wait %) samples


class LiveCapacity:
    """Bracket, bisect and confirm every member's capacity at once, one probe per round,
    advanced by the session's poll (see the module docstring)."""

    def __init__(
        self,
        core: RaceCore,
        plan: CapacityPlan,
        ids: list[str],
        start: float,
        rate_mode: bool,
        max_probe_s: float,
    ) -> None:
        self.core = core
        self.plan = plan
        self.slo = Slo.parse(plan.slo)
        self.rate_mode = rate_mode
        self.needed = needed_answers(self.slo.quantile)
        self.min_s = min(MIN_PROBE_S, max_probe_s)
        self.max_s = max(max_probe_s, self.min_s)
        bounds = bounds_for(start, rate_mode, plan)
        self.members = {i: _Member(CapacitySearch(bounds)) for i in ids}
        self.round = 0
        self.phase = "set"  # set → settle → measure → set … → done
        self._since = 0.0
        self.done = False
        self._seen = -1  # the last engine snapshot whose interval a probe kept
        self._meter = NoiseMeter()
        self._mark: Mark | None = None  # the machine at the probe's start (a real engine's)

    # --- driving ------------------------------------------------------------------

    async def advance(self, now: float) -> None:
        """One step of the round, when it is due."""
        if self.done:
            return
        for i, m in self.members.items():
            if not m.gone and self._gone(i):
                m.gone = True
        if self.phase == "set":
            loads = self._next_loads()
            if not loads:
                self.done = True
                return
            self.round += 1
            for i, load in loads.items():
                self.members[i].load = load
                # in the race's own unit (the search runs in the mode the race is in)
                await self.core.set_level(load, [i])
            self.phase, self._since = "settle", now
        elif self.phase == "settle":
            if now - self._since >= SETTLE_S + self.core.settings.warmup:
                # the probe's figures start here: the panes show this probe's totals,
                # and each member's CPU per request counts from here (level_mark)
                self.core.reset_totals(0.0, self._probing())
                self.phase, self._since = "measure", now
                snap = self.core.engine.latest
                self._seen = snap.seq if snap is not None else -1
                for i in self._probing():
                    self.members[i].slices = []
                    self.members[i].used = []
                pids = [p for i in self._probing() for p in self.core.engine.engine_pids(i)]
                self._mark = self._meter.mark(pids) if pids else None
        elif self.phase == "measure":
            self._keep_interval()
            took = now - self._since
            ready = all(
                (t := self.core.target(i)) is None or t.total.requests >= self.needed
                for i in self._probing()
            )
            if took >= self.max_s or (took >= self.min_s and ready):
                self._judge(took)
                self.phase = "set"

    def _keep_interval(self) -> None:
        """Each new engine interval of a probe, kept: its own time series, judged as
        bench's and tune's are (rules/steadiness.py)."""
        snap = self.core.engine.latest
        if snap is None or snap.seq == self._seen:
            return
        self._seen = snap.seq
        for i in self._probing():
            member = self.core.members.get(i)
            res = member.resources if member is not None else None
            if res is not None:
                self.members[i].used.append((res.cpu_percent, res.cpu_wait_percent))
            t = self.core.target(i)
            if t is not None:
                lat = t.interval.latency
                self.members[i].slices.append(
                    ProbeSlice(lat.count, lat.p50, lat.p90, lat.p99, lat.p999, lat.max,
                               t.interval.goodput)
                )  # fmt: skip

    def _probing(self) -> list[str]:
        return [i for i, m in self.members.items() if m.load is not None and not m.gone]

    def _next_loads(self) -> dict[str, float]:
        loads = {}
        for i, m in self.members.items():
            m.load = None
            if m.gone or m.search.done:
                continue
            load = m.search.next_load()
            if load is not None:
                loads[i] = load
        return loads

    def _judge(self, seconds: float) -> None:
        felt = self._meter.since(self._mark) if self._mark is not None else None
        for i in self._probing():
            m = self.members[i]
            assert m.load is not None
            t = self.core.target(i)
            if t is None:  # detached mid-probe (it crashed): no figures, no verdict
                m.gone = True
                continue
            window = t.total
            try:
                hist = self.core.engine.total_histogram(i)
            except KeyError:
                hist = None
            verdict = self.slo.judge_window(window, hist)
            n = len(m.search.probes)
            res = self.core.sample_now(i)
            if res is not None:
                m.rss[n] = res.rss
            cpu = self.core.cpu_per_request_us(i, window.requests)
            if cpu is not None:
                m.cpu_us[n] = cpu
            busy, starved_probe = _machine(felt, m.used)
            m.search.record(
                Probe(
                    load=m.load,
                    meets=verdict.meets,
                    rps=window.goodput,
                    why=verdict.why,
                    figures=verdict.figures(),
                    answers=window.requests,
                    enough=window.requests >= self.needed,
                    seconds=seconds,
                    unsteady=unsteady_of(m.slices, self.slo),
                    busy=busy,
                    starved=starved_probe,
                )
            )

    def _gone(self, i: str) -> bool:
        m = self.core.members.get(i)
        return m is None or m.handle.state in (StackState.CRASHED, StackState.STOPPED)

    # --- reading ------------------------------------------------------------------

    def loads(self) -> dict[str, float]:
        """The load each member is probed at now (the panes' and the slider's level)."""
        return {i: m.load for i, m in self.members.items() if m.load is not None}

    def status(self) -> str:
        """The status line's words: the round and each member's probe."""
        what = unit(self.rate_mode)
        each = " · ".join(
            f"{i} {at_load(m.load, what)} {m.search.phase}"
            for i, m in self.members.items()
            if m.load
        )
        stage = "settling" if self.phase == "settle" else "measuring"
        return f"capacity under {self.slo.text}: probe {self.round} {stage} · {each}"

    def results(self) -> dict[str, CapacityResult]:
        """Each member's capacity with the memory and CPU per request measured there
        (the probes' full levels stay with bench and tune: the app keeps figures)."""
        out = {}
        for i, m in self.members.items():
            search = m.search
            if not search.probes:
                continue
            cap = search.result()
            at_cap = [n for n, p in enumerate(cap.probes) if p.meets and p.load == cap.load]
            out[i] = found(
                cap,
                self.slo,
                self.rate_mode,
                self.needed,
                self.plan,
                stopped=cap.stopped or ("the stack stopped" if m.gone else ""),
                rss=max((m.rss.get(n, 0) for n in at_cap), default=0),
                cpu=[m.cpu_us[n] for n in at_cap if n in m.cpu_us],
            )
        return out


def _machine(felt: ProbeNoise | None, used: list[tuple[float, float]]) -> tuple[bool, bool]:
    """A probe's `busy` and `starved` flags, by bench's rule (noise.py `probe_flags`):
    from the machine over the probe (None: a model engine, no machine) and the stack's
    median use of and wait for a core in its samples meanwhile."""
    if felt is None:
        return False, False
    cpu = statistics.median(u for u, _ in used) if used else 0.0
    wait = statistics.median(w for _, w in used) if used else 0.0
    return probe_flags(felt, cpu, wait)
