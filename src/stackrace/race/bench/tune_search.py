"""The search of `stackrace tune`: which configuration of which server holds the most
req/s under the SLO on this machine, and how sure that is.

    search = TuneSearch(space, TunePlan(budget_s=180), seed=7)
    while (ask := search.next(elapsed)) is not None:
        search.record(ask, measure(ask.name, ask.load))   # a Probe; None: it failed
    outcome = search.outcome()                            # winner or tie, every point

A state machine, like race/core/capacity_search.py (whose search it runs for each configuration):
the driver (race/bench/tune_run.py) owns the servers, the engine and the clock; this decides
what to measure next, from the probes alone. So it is unit-tested on formulas and on
recorded noisy samples, and a journal's probes recorded again bring it back to where a
killed tune stopped (the shuffles come from `seed`, the budget from the `elapsed` each
probe was asked at: both are in the journal).

How it searches:
1. **A coarse pass over the whole space**, not its ends: on each numeric axis up to
   `COARSE_PER_AXIS` values spread on a log scale (the ends and the value nearest their
   geometric middle: workers 1/2/5, threads 1/4/32), every choice of a choice axis, for
   every server named; each configuration's capacity found by the capacity search
   (bracket from its nearest measured neighbour's answer, bisect to `precision`, the
   break re-checked once). The first one's answer is measured twice more at once: the
   A/A noise before anything is compared.
2. **Refinement around the leader**: the leader's neighbours on every axis (one step
   each way in the full list of values; every other choice) are measured before it can
   be named, and again whenever another configuration takes the lead.
3. **Interleaved rounds**: the leader and every configuration it does not beat with
   `CONFIDENCE` (at most `MAX_CONTENDERS`) are measured again at their answers' loads,
   once per round, in an order shuffled each round, so that the machine's drift hits
   them alike; a round that misses the SLO at a configuration's load measures it one
   step lower (its sample is what it held that round). Rounds go on until the ranking
   is decided (rules/confidence.py: a winner beats each other with 95 %, by the paired
   test over shared rounds or by their intervals) and the contenders' intervals are
   within `INTERVAL_TARGET`, or until `MAX_ROUNDS` or the budget.

The outcome names a winner only with its confidence, after `MIN_ROUNDS` rounds;
otherwise the leaders tied within noise, or "not decided" when the budget ended first.
It lists every point tried (and in which phase), the points never measured, whether the
leader sits on an edge of its range (the best may lie beyond), and the A/A noise.

Why not a search library (optuna's successive halving, hyperopt, nevergrad): the space
is small and discrete (tens of points), and what decides here is the noise of a shared
machine, which those treat as independent trials of a learning curve; interleaved,
paired rounds and an A/A floor are this module's reason to exist, a few hundred lines
of plain Python where they would bring numpy and scipy for a bootstrap of ten numbers.

The space it searches (`Space`: each server with its axes, the configurations' names,
the coarse pass's points, a point's neighbours and edges; a point is a tuple of indices,
one per axis, in the order of the server's axes) and what it found (`TuneOutcome`: each
configuration's evidence, the ranking, and the verdict in one sentence: a winner only
with the confidence it beats the runner-up with, else a tie within noise, or "not
decided") are the search's own terms, here with it.

Long because the search, the space it moves in and the outcome it decides are one job:
they were cut into three modules to pass a line cap, and the search imported both
others (the outcome the space) for nothing but these names.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from stackrace.race.core.capacity_search import Bounds, Capacity, CapacitySearch, Probe
from stackrace.rules.confidence import (
    CONFIDENCE,
    Estimate,
    Ranking,
    beaten,
    estimate,
    noise_sigma,
    rank,
)

MAX_CONTENDERS = 4
MAX_ROUNDS = 12
INTERVAL_TARGET = 0.10  # a contender's 90 % interval within ±10 % of its median
AA_REPEATS = 2  # the first configuration's answer measured again at once: the A/A
PROBE_GUESS_S = 2.5  # a probe's time until some are measured

# why a tune ended
DECIDED = "decided"
NARROW = "intervals narrow enough"
ROUNDS = "round limit reached"
BUDGET = "budget spent"
NOTHING = "nothing measurable"


# --- the space: servers, axes, points -------------------------------------------------

COARSE_PER_AXIS = 3


Point = tuple[int, ...]


@dataclass(frozen=True)
class Space:
    """The configurations: each server (a stack's base name, or a --url label) with its
    axes, tunable → values in order (numeric axes ascending)."""

    servers: dict[str, dict[str, list[str]]]

    def name(self, server: str, point: Point) -> str:
        axes = self.servers[server]
        if not axes:
            return server
        return f"{server}:" + ",".join(
            f"{k}={v[i]}" for (k, v), i in zip(axes.items(), point, strict=True)
        )

    def numeric(self, server: str, axis: str) -> bool:
        return all(v.isdigit() for v in self.servers[server][axis])

    def points(self, server: str) -> list[Point]:
        sizes = [len(v) for v in self.servers[server].values()]
        out: list[Point] = [()]
        for n in sizes:
            out = [(*p, i) for p in out for i in range(n)]
        return out

    def coarse(self, server: str) -> list[Point]:
        """Up to COARSE_PER_AXIS values on each numeric axis (log-spaced), every choice;
        the middle point first (its answer is measured again at once, the A/A noise: in
        the middle of the space it is quick, where threads=1 needs 12 s a probe to get a
        p99's 1,000 answers from a server doing 80 req/s), then the others."""
        picks: list[list[int]] = []
        for axis, values in self.servers[server].items():
            if self.numeric(server, axis) and len(values) > COARSE_PER_AXIS:
                picks.append(_log_spread([int(v) for v in values], COARSE_PER_AXIS))
            else:
                picks.append(list(range(len(values))))
        out: list[Point] = [()]
        for idx in picks:
            out = [(*p, i) for p in out for i in idx]
        middle = tuple(idx[len(idx) // 2] for idx in picks)
        return [middle] + [p for p in out if p != middle]

    def neighbours(self, server: str, point: Point) -> list[Point]:
        """One step each way on every numeric axis; every other value of a choice axis."""
        out = []
        for k, (axis, values) in enumerate(self.servers[server].items()):
            if self.numeric(server, axis):
                steps = [point[k] - 1, point[k] + 1]
            else:
                steps = [i for i in range(len(values)) if i != point[k]]
            for i in steps:
                if 0 <= i < len(values):
                    out.append((*point[:k], i, *point[k + 1 :]))
        return out

    def edges(self, server: str, point: Point) -> list[str]:
        """Where a point sits on the edge of its numeric range (the best may lie beyond)."""
        out = []
        for k, (axis, values) in enumerate(self.servers[server].items()):
            if not self.numeric(server, axis) or len(values) < 2:
                continue
            if point[k] == len(values) - 1:
                out.append(f"{axis}={values[-1]} is the highest tried: more may do better")
            elif point[k] == 0 and int(values[0]) > 1:
                out.append(f"{axis}={values[0]} is the lowest tried: fewer may do better")
        return out


def _log_spread(values: list[int], k: int) -> list[int]:
    """Indices of k values spread evenly on a log scale between the ends (each the
    nearest value to its target; the ends always)."""
    lo, hi = math.log(values[0]), math.log(values[-1])
    picked: list[int] = []
    for j in range(k):
        target = lo + (hi - lo) * j / (k - 1)
        best = min(range(len(values)), key=lambda i: (abs(math.log(values[i]) - target), i))
        if best not in picked:
            picked.append(best)
    return sorted(picked)


# --- what a tune found -----------------------------------------------------------------

MIN_ROUNDS = 2  # interleaved rounds before a winner is named
# A configuration whose search met the SLO at no load while the machine starved it at
# every miss (it got a core half the time it wanted one or less: race/core/noise.py
# `starved`) is searched once more; starved twice, it is left out of the ranking with
# this, never ranked as 0 req/s (a resumed tune beside a busy test suite once named a
# winner "with over 99 % confidence" over a server the machine had starved).
STARVED_OUT = (
    "not measured: it met the SLO at no load, and the machine starved it at every miss "
    "({}: it got a core half the time it wanted one or less)"
)


def machine_missed(found: Capacity) -> bool:
    """Every miss of a search starved by the machine (and at least one miss)."""
    misses = [p for p in found.probes if not p.meets]
    return bool(misses) and all(p.starved for p in misses)


@dataclass
class Candidate:
    name: str
    server: str
    point: Point
    phase: str  # why it was first measured: coarse or refine
    search: CapacitySearch | None = None
    capacity: Capacity | None = None
    load: float | None = None  # where the rounds measure it
    samples: dict[int, float] = field(default_factory=dict)  # round → req/s held (0: none)
    rounds: list[tuple[int, Probe]] = field(default_factory=list)
    error: str = ""
    # searched once more: its first search met the SLO nowhere, starved at every miss
    again: bool = False
    starved: str = ""  # why it is not ranked: starved by the machine (STARVED_OUT), or ""

    @property
    def measured(self) -> bool:
        return self.capacity is not None or bool(self.error)


@dataclass(frozen=True)
class TuneOutcome:
    ranking: Ranking
    estimates: dict[str, Estimate]
    candidates: dict[str, Candidate]
    not_measured: list[str]
    edges: list[str]
    rounds: int
    stopped: str
    sigma: float | None
    aa_repeats: int
    verdict: str  # one sentence: the winner and its confidence, or the tie, or neither
    aa_rounds: int = 0  # of the A/A's measurements, those in a round of their own

    @property
    def winner(self) -> str | None:
        return self.ranking.winner


def _fmt(e: Estimate) -> str:
    return e.said()


def sure(confidence: float) -> str:
    """A confidence in words: "97 %", but "over 99 %" where rounding would say "100 %"
    (no ranking of two noisy figures is certain)."""
    return "over 99 %" if confidence >= 0.995 else f"{confidence * 100:.0f} %"


def verdict(ranking: Ranking, winner: str | None, unrefined: bool, rounds: int) -> str:
    """One sentence: the winner and its confidence, or the tie, or why neither."""
    order = ranking.order
    if not order or order[0].median <= 0:
        return "no configuration met the SLO"
    lead = order[0]
    if winner is not None:
        if len(order) == 1:
            # nothing was compared: no winner, only a figure
            return f"one configuration measured, nothing to compare it with: {winner}: {_fmt(lead)}"
        runner = order[1]
        b = next(x for x in ranking.beats if x.other == runner.name)
        how = f"over {b.rounds} interleaved rounds" if b.how == "paired" else "by their intervals"
        return (
            f"winner: {winner}: {_fmt(lead)}; it beats the runner-up {runner.name} "
            f"({runner.median:,.0f} req/s) with {sure(b.confidence)} confidence ({how})"
        )
    if unrefined:
        return (
            f"not decided: the leader {lead.name}, {_fmt(lead)}, has neighbours not measured "
            "(the budget ended first); no winner is named"
        )
    if ranking.tied and len(ranking.tied) > 1:
        names = ", ".join(ranking.tied)
        return (
            f"a tie within noise: {names}; none beats the others with "
            f"{CONFIDENCE * 100:.0f} % confidence after {rounds} rounds. The leader, "
            f"{lead.name}: {_fmt(lead)}"
        )
    return (
        f"not decided: the leader {lead.name}, {_fmt(lead)}, was measured in {rounds} "
        f"interleaved rounds, fewer than the {MIN_ROUNDS} a winner needs (the budget ended "
        "first); no winner is named"
    )


# --- the search ------------------------------------------------------------------------


# the axis a cause implies (stackrace.rules.cause's kinds; docs/tune.md)
STEER = {
    "blocking wait": "threads",
    "cpu": "workers",
    "gil": "workers",
    "event loop blocked": "workers",
    "accept queue": "workers",
}


@dataclass(frozen=True)
class TunePlan:
    budget_s: float = 180.0
    start: float = 1.0  # the first load a search brackets from
    ceiling: float = 4096.0
    integer: bool = True  # closed loop (connections); False: a rate
    precision: float = 0.10
    max_probes: int = 12  # per configuration's capacity search


@dataclass(frozen=True)
class Ask:
    """What to measure next: a configuration at a load, and why."""

    name: str
    load: float
    phase: str  # "coarse", "refine" (a capacity search) or "round"
    round: int = 0


class TuneSearch:
    """See the module docstring. `next(elapsed)` says what to measure (None: done);
    `record(ask, probe)` takes its result (None: it could not be measured)."""

    def __init__(self, space: Space, plan: TunePlan, seed: int) -> None:
        self.space = space
        self.plan = plan
        self.rng = random.Random(seed)
        self.cands: dict[str, Candidate] = {}
        # the servers' coarse points in turn (one of each, then the next of each): a
        # budget that ends early has seen every server, not the first one whole
        per = [[(sv, p, "coarse") for p in space.coarse(sv)] for sv in space.servers]
        self.queue: list[tuple[str, Point, str]] = [
            x
            for k in range(max(map(len, per), default=0))
            for pts in per
            if k < len(pts)
            for x in [pts[k]]
        ]
        self.active: Candidate | None = None
        self.round = 0  # the round under way (0: none yet)
        self.order: list[str] = []  # the round's remaining asks
        self.retry: str | None = None  # a contender measured one step lower in this round
        self.stopped = ""
        self.probe_s: list[float] = []
        self._pending: Ask | None = None
        self.steered = ""  # the cause the coarse pass was ordered by ("" not yet)
        self.again: list[str] = []  # searched once more after the coarse pass (`_finish`)

    def steer(self, cause: str) -> str:
        """Order the coarse points still to measure by the cause seen at the first
        configuration's boundary (stackrace.rules.cause): more of the knob it implies
        first (`STEER`: threads for a blocking wait, workers for cpu or gil …); every
        point is still measured. Once per tune; the sentence that says so ("" none)."""
        axis = STEER.get(cause)
        if self.steered or axis is None:
            return ""
        self.steered = cause

        def more(item: tuple[str, Point, str]) -> int:
            server, point, _ = item
            axes = list(self.space.servers[server])
            if axis not in axes or not self.space.numeric(server, axis):
                return 0
            return -int(self.space.servers[server][axis][point[axes.index(axis)]])

        self.queue.sort(key=more)  # stable: the rest keep their order
        return f"the cause seen ({cause}): configurations with more {axis} are measured first"

    # --- what next ----------------------------------------------------------------------

    def _probe_time(self) -> float:
        return sum(self.probe_s) / len(self.probe_s) if self.probe_s else PROBE_GUESS_S

    def next(self, elapsed: float) -> Ask | None:
        if self._pending is not None:
            return self._pending
        if self.stopped:
            return None
        if elapsed + self._probe_time() > self.plan.budget_s:
            self._stop(BUDGET)
            return None
        ask = self._decide()
        self._pending = ask
        return ask

    def _stop(self, why: str) -> None:
        self.stopped = why
        if self.active is not None:
            self._finish(self.active)
        for name in self.again:  # starved once, and no time left to search it again
            c = self.cands[name]
            c.error = c.starved = STARVED_OUT.format("no time was left to search again")
        self.again.clear()

    def _decide(self) -> Ask | None:
        while True:
            if self.active is not None:
                load = self.active.search.next_load() if self.active.search else None
                if load is not None:
                    return Ask(self.active.name, load, self.active.phase)
                self._finish(self.active)
            nxt = self._next_to_search()
            if nxt is not None:
                self._begin(*nxt)
                continue
            ask = self._next_in_round()
            if ask is not None:
                return ask
            if self.stopped:
                return None

    def _next_to_search(self) -> tuple[str, Point, str] | None:
        while self.queue:
            server, point, phase = self.queue.pop(0)
            if self.space.name(server, point) not in self.cands:
                return server, point, phase
        if self.order or self.retry is not None:
            return None  # a round under way is finished first: its order is its point
        if self.again:
            c = self.cands[self.again.pop(0)]
            return c.server, c.point, c.phase
        lead = self._leader()
        if lead is None:
            return None
        for p in self.space.neighbours(lead.server, lead.point):
            if self.space.name(lead.server, p) not in self.cands:
                return lead.server, p, "refine"
        return None

    def _begin(self, server: str, point: Point, phase: str) -> None:
        name = self.space.name(server, point)
        first = not self.cands
        near = self._nearest(server, point)
        start = near if near is not None else self.plan.start
        bounds = Bounds(
            start=max(1.0, min(start, self.plan.ceiling)),
            ceiling=self.plan.ceiling,
            integer=self.plan.integer,
            precision=self.plan.precision,
            confirm=AA_REPEATS if first else 0,
            max_probes=self.plan.max_probes,
        )
        again = self.cands.get(name)
        if again is not None:  # searched again (`_finish`): a fresh search, the same one
            again.search = CapacitySearch(bounds)
            self.active = again
            return
        cand = Candidate(name, server, point, phase, search=CapacitySearch(bounds))
        self.cands[name] = cand
        self.active = cand

    def _nearest(self, server: str, point: Point) -> float | None:
        """The answer of the nearest configuration measured on the same server."""
        best: tuple[int, float] | None = None
        for c in self.cands.values():
            if c.server != server or c.load is None:
                continue
            d = sum(abs(a - b) for a, b in zip(c.point, point, strict=True))
            if best is None or d < best[0]:
                best = (d, c.load)
        return best[1] if best else None

    def _finish(self, cand: Candidate) -> None:
        if cand.search is not None and cand.search.probes:
            found = cand.search.result()
            if found.load is None and machine_missed(found):
                self.active = None
                if not cand.again and not self.stopped:
                    # the machine, not the server, is what it measured: searched once
                    # more after the coarse pass (a build's burst may be over by then)
                    cand.again = True
                    self.again.append(cand.name)
                    return
                cand.capacity = found  # its probes stay evidence; it is not ranked
                searches = "in two searches" if cand.again else "no time was left to search again"
                cand.error = cand.starved = STARVED_OUT.format(searches)
                return
            cand.capacity = found
            cand.load = cand.capacity.load
            held = cand.capacity.rps if cand.capacity.load is not None else None
            cand.samples[0] = held or 0.0
        elif not cand.error:
            cand.error = "not measured (the budget ended first)"
        self.active = None

    def _contenders(self) -> list[str]:
        ranking = self.ranking()
        lead = ranking.leader
        if lead is None:
            return []
        close = {b.other for b in ranking.beats if not beaten(b)}
        names = [lead.name] + [e.name for e in ranking.order[1:] if e.name in close]
        return [n for n in names if self.cands[n].load is not None][:MAX_CONTENDERS]

    def _next_in_round(self) -> Ask | None:
        if self.retry is not None:
            name, self.retry = self.retry, None
            return Ask(name, self._lower(self.cands[name]), "round", self.round)
        while self.order:
            name = self.order.pop(0)
            c = self.cands[name]
            if c.load is not None and not c.error:
                return Ask(name, c.load, "round", self.round)
        # a round ended (or none began): decide whether another is needed
        if self.round > 0:
            done = self._decided()
            if done:
                self.stopped = done
                return None
        contenders = self._contenders()
        if not contenders:
            self.stopped = NOTHING if self._leader() is None else DECIDED
            return None
        self.round += 1
        self.order = list(contenders)
        self.rng.shuffle(self.order)
        return self._next_in_round()

    def _decided(self) -> str:
        lead = self._leader()
        if lead is not None and any(
            self.space.name(lead.server, p) not in self.cands
            for p in self.space.neighbours(lead.server, lead.point)
        ):
            return ""  # a new leader: its neighbours first (_next_to_search)
        if self.round >= MAX_ROUNDS:
            return ROUNDS
        if lead is None or sum(1 for r in lead.samples if r > 0) < MIN_ROUNDS:
            return ""  # the leader held its load in too few rounds yet
        contenders = self._contenders()
        ranking = self.ranking()
        ests = ranking.order
        narrow = all(e.half_width <= INTERVAL_TARGET for e in ests if e.name in contenders)
        if ranking.winner is not None and (len(contenders) == 1 or narrow):
            return DECIDED
        if narrow:
            return NARROW
        return ""

    def _lower(self, c: Candidate) -> float:
        """One step below a load that missed in a round: the highest load its search met
        below it, else the load less the precision."""
        assert c.load is not None
        met = list(c.capacity.probes if c.capacity else []) + [p for _, p in c.rounds]
        below = [p.load for p in met if p.meets and p.load < c.load]
        step = c.load / (1 + self.plan.precision)
        lower = max(below) if below else step
        if self.plan.integer:
            lower = float(max(1, min(round(lower), int(c.load) - 1)))
        return max(1.0, lower)

    # --- results ------------------------------------------------------------------------

    def record(self, ask: Ask, probe: Probe | None, error: str = "") -> None:
        if self._pending is None or ask != self._pending:
            raise ValueError(f"recorded {ask}, asked {self._pending}")
        self._pending = None
        c = self.cands[ask.name]
        if probe is None:  # it could not be measured: out of the tune, with why
            c.error = error or "could not be measured"
            if c.search is not None and self.active is c:
                self.active = None
                if c.search.probes:
                    c.capacity = c.search.result()
            c.load = None
            self.order = [n for n in self.order if n != c.name]
            return
        self.probe_s.append(probe.seconds)
        if ask.phase != "round":
            assert c.search is not None
            c.search.record(probe)
            return
        c.rounds.append((ask.round, probe))
        if probe.meets:
            c.samples[ask.round] = probe.rps
            if probe.load < (c.load or 0):
                c.load = probe.load  # it held only one step lower: measure it there now
        elif probe.load == c.load:
            self.retry = c.name  # one step lower, in this round
        else:
            # missed one step lower too: no sample this round (its answer was luck, or
            # the machine stalled twice), and the next round measures it lower still
            c.load = self._lower(c)

    def _sigma(self) -> tuple[float | None, int, int]:
        """The A/A noise: repeats of one configuration at one load that met; how many,
        and how many of them in a round of their own (the rest: probes in a row)."""
        groups: dict[tuple[str, float], list[tuple[float, bool]]] = {}
        for c in self.cands.values():
            probes = [(p, False) for p in (c.capacity.probes if c.capacity else [])]
            probes += [(p, True) for _, p in c.rounds]
            for p, in_round in probes:
                if p.meets and p.rps > 0:
                    groups.setdefault((c.name, p.load), []).append((p.rps, in_round))
        repeated = [g for g in groups.values() if len(g) >= 2]
        return (
            noise_sigma([[rps for rps, _ in g] for g in repeated]),
            sum(len(g) for g in repeated),
            sum(1 for g in repeated for _, in_round in g if in_round),
        )

    def estimates(self) -> dict[str, Estimate]:
        sigma, _, _ = self._sigma()
        return {
            c.name: estimate(c.name, list(c.samples.values()), sigma)
            for c in self.cands.values()
            if c.samples
        }

    def ranking(self) -> Ranking:
        pairs = {
            c.name: {r: v for r, v in c.samples.items() if r > 0}
            for c in self.cands.values()
            if c.samples
        }
        return rank(list(self.estimates().values()), pairs)

    def _leader(self) -> Candidate | None:
        lead = self.ranking().leader
        return self.cands[lead.name] if lead is not None and lead.median > 0 else None

    def outcome(self) -> TuneOutcome:
        ranking = self.ranking()
        sigma, repeats, in_rounds = self._sigma()
        lead = self._leader()
        edges = self.space.edges(lead.server, lead.point) if lead is not None else []
        every = [self.space.name(s, p) for s in self.space.servers for p in self.space.points(s)]
        not_measured = [n for n in every if n not in self.cands or not self.cands[n].samples]
        winner = ranking.winner
        rounds_done = self.round if not self.order and self.retry is None else self.round - 1
        held = sum(1 for r in lead.samples if r > 0) if lead is not None else 0
        if winner is not None and held < MIN_ROUNDS and len(ranking.order) > 1:
            winner = None
        if winner is not None and self._leader_unrefined():
            winner = None
        text = verdict(ranking, winner, self._leader_unrefined(), rounds_done)
        if winner is None and ranking.winner is not None:
            ranking = Ranking(ranking.order, None, None, ranking.tied, ranking.beats)
        return TuneOutcome(
            ranking=ranking,
            estimates=self.estimates(),
            candidates=dict(self.cands),
            not_measured=not_measured,
            edges=edges,
            rounds=max(0, rounds_done),
            stopped=self.stopped,
            sigma=sigma,
            aa_repeats=repeats,
            verdict=text,
            aa_rounds=in_rounds,
        )

    def _leader_unrefined(self) -> bool:
        lead = self._leader()
        return lead is not None and any(
            self.space.name(lead.server, p) not in self.cands
            or not self.cands[self.space.name(lead.server, p)].measured
            for p in self.space.neighbours(lead.server, lead.point)
        )
