"""Capacity under an SLO: the highest load a stack serves while it meets its target.

    search = CapacitySearch(Bounds(start=1, ceiling=4096, integer=True))
    while (load := search.next_load()) is not None:
        search.record(measure(load))          # a Probe: did this load meet the SLO?
    print(search.result().sentence("p99 < 50 ms", "c"))

A state machine, not a loop that measures: the front end (bench, tune, the app's `k`)
owns the engine, the clock and the stacks, and asks the search what to measure next.
The same search then runs on a real race, on the synthetic engine, or on a formula in a
unit test, and a search can be interleaved with other stacks' searches (the app
searches every stack at once, each pane following its own probes).

How it searches (k6's breakpoint test, stopped by a rule instead of by hand):
1. **Bracket**: measure `start`, then double the load until a probe misses the SLO
   (or the ceiling is met). When `start` itself misses, halve it down to `floor` (1):
   a front end may start where the user's first level is, and a miss there proves
   nothing about lower loads. A miss at the floor is the answer too: the SLO cannot be
   met at any load (the latency floor is above the target), and the result says so
   with the figure that proves it, once the floor has missed twice.
2. **Bisect** between the highest load that met the SLO and the lowest that missed, at
   the geometric middle (loads span orders of magnitude; for whole numbers the middle is
   rounded and the search stops when the two are neighbours), until the gap is within
   `precision` of the lower one.
3. **Confirm** the answer: the highest passing load is measured `confirm` more times.
   Latency percentiles on a shared, noisy machine move from run to run; if a repeat
   misses, that load was passing by luck, the search takes the next passing load below
   and bisects again. The repeats' spread of req/s is the stated margin (± %).
4. **Re-check the break**: the lowest miss is measured once more. One stall of a shared
   core (another process, the engine's own) turns a single probe's p99 into a miss, and
   a miss is never measured again otherwise: one bad second in the bracket would cap
   the answer for good. If the repeat meets, the miss was the machine's: that load is
   the new pass and the search goes on above it (bracket or bisect), and the break it
   then ends on is re-checked too: the break an answer names was seen missing twice. It
   cannot swing back and forth: each contradicted re-check is a miss below a pass, and
   two of those end the search on an unstable boundary (below). A search on a machine
   busy with other work once went 32 (miss) → 16 (miss) → 8 and on, forgave 16 at its
   re-check, and ended "breaks at c=32" on 32's single probe, for a server that met
   up to c=50.

A budget bounds it: a number of probes and a time (the front end reports each probe's
seconds); when it is spent the result says so and names the bracket it got to.

**A miss on a busy machine is measured again.** The front end marks a probe `busy` when
it saw the machine disturb it (race/core/noise.py `probe_busy`: other processes took a
share of a core, or the engine or the stack waited for one): a p99 rests on its worst 1
%, and one stall of a shared core of 40-130 ms in a probe of a second turned a p99 of 50
ms into a miss below the true capacity (c=19 for 20, c=15 for 50 beside a test lane).
Such a miss is kept as evidence (phase `busy`) and that load is measured again, once; a
miss that repeats counts as any other, and `BUSY_REMEASURES` bounds them per search, so
a machine that is always busy costs a few probes, not an endless search. In the
bisection, the confirms, and the bracket on its way down (a start that missed is not an
overshoot: halving below it on a stall would cap the search there); not the climbing
bracket's first miss: the doubling's overshoot is nearly always real and its break is
re-checked anyway, and a re-check is already a second measurement. A pass is never
measured again for being busy: a stall only makes a figure worse. A busy miss that its
re-measure contradicts is still a contradiction: a stall, or a server whose speed comes
and goes (a server fast 4 s and slow 1 s, beside a test lane, had two such and was
answered at its fast speed when only counted misses were weighed); two contradictions of
either kind end the search on an unstable boundary as below, and the noise line says the
machine was busy.

**A break the machine starved is a floor, said so.** A probe is `starved` when the
stack got a core half the time it wanted one or less (noise.py `starved`). When every
miss at the break was starved, re-measuring cannot tell the server's limit from the
machine's (CI, beside three test lanes: c=45 missed twice at 31 % of a core for a server
that meets c=50): the answer stands as measured, and the sentence says it is a floor on
this machine now, not the server's limit (`Capacity.starved_break`).

**An unstable boundary is an answer too.** The re-check forgives one miss below a pass
(a stall of a shared core). Two or more such misses are not a stall: the server both
meets and misses at the same loads (a server whose speed changes from second to second,
a machine whose other work comes and goes). The search then ends on `UNSTABLE`: the
answer is the highest load met below every miss (what holds for sure), and the range
from the lowest miss to the highest pass is stated as unstable, never as "precision
reached".

What a probe must carry to mean something is the front end's business (`needed_answers`
tells it how many answers a percentile needs: ten beyond the percentile's tail, so that
p99 rests on at least 1,000 answers), and each probe records whether it had them. A
pass on fewer answers (`enough` false: the front end ran the probe as long as it could)
still moves the search up, since a higher load brings more answers, but an answer that
rests only on such passes says so (`Capacity.thin`).

The search is deterministic: the same probes recorded in the same order lead it through
the same states, so a search is resumed by recording the probes of a journal again
(race/core/journal.py) and goes on where it stopped.

Long because the search is one state machine: its phases (bracket, bisect, confirm,
re-check, busy re-measure) decide from each other's probes, and the answer's sentence
names what those probes proved; split, each half would read the other's state.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from stackrace.report.schema import CAPACITY_INTERRUPTED
from stackrace.rules.steadiness import PROOF as UNSTEADY_PROOF

# why a search ended
PRECISE = "precision reached"
CEILING = "met the SLO up to the ceiling"
CANNOT = "cannot meet the SLO at any load"
BUDGET = "budget spent"
PROBES = "probe limit reached"
UNSTABLE = "unstable boundary"
INTERRUPTED = CAPACITY_INTERRUPTED  # the search did not end: what it saw, never a capacity
UNSTABLE_MISSES = 2  # misses at or below a pass: one is a stall (re-checked), two are not
BUSY_REMEASURES = 6  # misses on a busy machine measured again, per search
BUSY = "busy"  # the phase of a miss that was measured again because the machine was busy


def needed_answers(quantile: float | None, tail: int = 10) -> int:
    """How many answers a probe needs before a percentile means something: `tail`
    answers beyond it (p99: 1,000; p99.9: 10,000; p50: 20). None (a mean or a failure
    share): 100."""
    if quantile is None or not 0 < quantile < 1:
        return 100
    return max(20, math.ceil(tail / (1 - quantile)))


@dataclass(frozen=True)
class Bounds:
    """Where the search may go: loads from `start` to `ceiling`, whole numbers for a
    concurrency (closed loop) or any value for a rate (open loop)."""

    start: float = 1.0
    ceiling: float = 4096.0
    integer: bool = True
    precision: float = 0.05  # the gap between a pass and a miss, relative to the pass
    confirm: int = 2  # extra measurements of the answer
    max_probes: int = 40
    budget_s: float | None = None
    floor: float = 1.0  # the lowest load a search goes down to when `start` misses


@dataclass(frozen=True)
class Probe:
    """One measurement: the load asked, whether it met the SLO and why not, and the
    figures a reader needs to check it."""

    load: float
    meets: bool
    rps: float = 0.0  # good answers per second measured
    why: str = ""  # the SLO term missed, with its figure ("p99 74.1 ms > 50 ms")
    figures: dict[str, float] = field(default_factory=dict)  # p99_us, failures, …
    answers: int = 0
    enough: bool = True  # had the answers its percentile needs
    seconds: float = 0.0
    phase: str = ""  # bracket, bisect, confirm, recheck or busy (set by the search)
    busy: bool = False  # the machine disturbed it (race/core/noise.py probe_busy)
    starved: bool = False  # it got a core half the time it wanted one or less (noise.py)
    # its own intervals disagreed beyond a percentile's noise: the proof (rules/steadiness.py)
    unsteady: str = ""


@dataclass(frozen=True)
class Capacity:
    """The answer: the highest load that met the SLO (None: none did), the lowest that
    missed (None: none did, up to the ceiling), and the evidence."""

    load: float | None
    rps: float | None
    margin: float | None  # the confirming repeats' spread of req/s, ± share of the median
    breaks_at: float | None
    breaks_why: str
    stopped: str
    probes: list[Probe]
    # UNSTABLE: the loads from the lowest miss to the highest pass, where it both met
    # and missed (the answer, `load`, is the highest pass below all of them)
    unstable: tuple[float, float] | None = None
    thin: bool = False  # every pass at `load` had fewer answers than its percentile needs
    starved_break: bool = False  # every miss at `breaks_at` was starved by the machine

    def sentence(self, slo: str, unit: str = "c") -> str:
        """'meets p99 < 50 ms up to c=24 (1,240 req/s; 3 probes in a row within ±3 %, one
        round: no interval), breaks at c=26: p99 74 ms'."""

        def at(load: float) -> str:
            return f"{unit}={load:g}" if unit == "c" else f"{load:,.0f} {unit}"

        if self.stopped == INTERRUPTED:
            seen = f"met {slo} up to {at(self.load)}" if self.load is not None else "no pass yet"
            miss = f", missed at {at(self.breaks_at)}" if self.breaks_at is not None else ""
            return (
                f"interrupted after {len(self.probes)} probes ({seen}{miss}): "
                "no capacity claimed, the search did not end"
            )
        if self.load is None and self.unstable is not None:
            return (
                f"meets {slo} at no load for sure: unstable {self._where(at)}, "
                f"{self._evidence()}; {self._first()}{self._starved(floor=False)}"
            )
        if self.load is None:
            first = self.probes[0] if self.probes else None
            why = f": {first.why} at {at(first.load)}" if first and first.why else ""
            return f"cannot meet {slo} at any load{why}{self._starved(floor=False)}"
        # its repeats are probes in a row, not independent rounds: no interval, and the
        # sentence says so (an interval comes from rounds, rules/confidence.py)
        repeats = sum(1 for p in self.probes if p.meets and p.load == self.load)
        margin = (
            f"; {repeats} probes in a row within ±{self.margin * 100:.0f} %, one round: no interval"
            if self.margin is not None
            else "; one round: no interval"
        )
        rps = f" ({self.rps:,.0f} req/s{margin})" if self.rps is not None else ""
        text = f"meets {slo} up to {at(self.load)}{rps}"
        if self.thin:
            text += " [on fewer answers than the percentile needs]"
        if self.unstable is not None:
            return (
                f"{text}; unstable {self._where(at)}: {self._evidence()}; {self._first()}"
                f"{self._starved(floor=False)}"
            )
        if self.breaks_at is not None:
            text += f", breaks at {at(self.breaks_at)}: {self.breaks_why}{self._starved()}"
        else:
            text += f", not broken up to the ceiling ({self.stopped})"
        if self.stopped in (BUDGET, PROBES):
            text += f" [{self.stopped}: the true capacity lies in that bracket]"
        return text

    def _starved(self, floor: bool = True) -> str:
        if not self.starved_break:
            return ""
        so = (
            "this is a floor on this machine now, not the server's limit"
            if floor
            else "the misses may be the machine's, not the server's"
        )
        return (
            " (the machine starved the server at each miss there: it got a core half the "
            f"time it wanted one or less, so {so})"
        )

    def _where(self, at: Callable[[float], str]) -> str:
        assert self.unstable is not None
        lo, hi = self.unstable
        return f"at {at(lo)}" if lo == hi else f"from {at(lo)} to {at(hi)}"

    def _evidence(self) -> str:
        """What made it unstable, each count said only when there is one (never "0
        misses … both met and missed")."""
        assert self.unstable is not None
        hi = self.unstable[1]
        passes = [p.load for p in self.probes if p.meets]
        top = max(passes) if passes else None
        misses = sum(
            1
            for p in self.probes
            if not p.meets and p.phase != BUSY and top is not None and p.load <= top
        )
        shaky = sum(1 for p in self.probes if p.unsteady and p.phase != BUSY and p.load <= hi)
        forgiven = sum(
            1
            for p, nxt in zip(self.probes, self.probes[1:], strict=False)
            if p.phase == BUSY and not p.meets and nxt.load == p.load and nxt.meets
        )
        said = []
        if misses:
            said.append(f"{misses} miss{'es' if misses != 1 else ''} at or below a load that met")
        if forgiven:
            said.append(
                f"{forgiven} miss{'es' if forgiven != 1 else ''} its re-measure contradicted"
            )
        if shaky:
            said.append(
                f"{shaky} probe{'s' if shaky != 1 else ''} whose own seconds both met and "
                "clearly missed"
            )
        if not said:  # (never "… both met and missed there ()", a claim without its count)
            return "it both met and missed there"
        return "it both met and missed there (" + "; ".join(said) + ")"

    def _first(self) -> str:
        if self.breaks_why.startswith(UNSTEADY_PROOF):  # a probe's own seconds: its proof
            return self.breaks_why
        return f"first miss: {self.breaks_why}" if self.breaks_why else "no miss named"


class CapacitySearch:
    """Bracket, bisect, confirm (see the module docstring). `next_load()` says what to
    measure (None: done); `record(probe)` takes its result."""

    def __init__(self, bounds: Bounds) -> None:
        if bounds.start <= 0 or bounds.ceiling < bounds.start:
            raise ValueError("the search needs 0 < start <= ceiling")
        self.b = bounds
        self.probes: list[Probe] = []
        self.phase = "bracket"
        self.lo: float | None = None  # highest load known to meet the SLO
        self.hi: float | None = None  # lowest load known to miss it
        self._confirms: list[Probe] = []
        self._pending: float | None = None
        self._stopped = ""
        self._busy_left = BUSY_REMEASURES

    # --- what next --------------------------------------------------------------------

    def _round(self, load: float) -> float:
        if self.b.integer:
            load = float(max(1, round(load)))
        return min(max(load, min(self.b.floor, self.b.start)), self.b.ceiling)

    def _spent(self) -> str:
        if len(self.probes) >= self.b.max_probes:
            return PROBES
        if self.b.budget_s is not None and sum(p.seconds for p in self.probes) >= self.b.budget_s:
            return BUDGET
        return ""

    def _close_enough(self) -> bool:
        assert self.lo is not None and self.hi is not None
        if self.b.integer and self.hi - self.lo <= 1:
            return True
        return (self.hi - self.lo) <= self.b.precision * self.lo

    def next_load(self) -> float | None:
        if self._stopped:
            return None
        if self._pending is not None:
            return self._pending
        if self.unstable() is not None:  # more probes would not make it stable
            self._stopped = UNSTABLE
            return None
        spent = self._spent()
        if spent:
            self._stopped = spent
            return None
        load = self._decide()
        if load is None:
            return None
        self._pending = load
        return load

    def _decide(self) -> float | None:
        if self.phase == "bracket":
            if not self.probes:
                return self._round(self.b.start)
            last = self.probes[-1]
            if not last.meets:
                if self.lo is None:
                    # the start missed: halve down to the floor before saying the SLO
                    # cannot be met (a start above 1 proves nothing below it); a miss at
                    # the floor is measured once more (a stall of a shared core must not
                    # make "cannot meet at any load" out of one probe)
                    if last.load <= self.b.floor:
                        if self._missed_at(last.load) < 2:
                            self.phase = "recheck"
                            return self._round(self.b.floor)
                        self._stopped = CANNOT
                        return None
                    return self._round(max(self.b.floor, last.load / 2))
                self.phase = "bisect"
            elif self.hi is not None:  # found a pass on the way down: bisect above it
                self.phase = "bisect"
            elif last.load >= self.b.ceiling:
                self.phase = "confirm"
            else:
                return self._round(last.load * 2)
        if self.phase == "bisect":
            assert self.lo is not None and self.hi is not None
            if self._close_enough():
                self.phase = "confirm"
            else:
                mid = math.sqrt(self.lo * self.hi)
                mid = self._round(mid)
                if mid <= self.lo or mid >= self.hi:  # whole numbers: take the neighbour
                    mid = self.lo + 1 if self.b.integer else (self.lo + self.hi) / 2
                return mid
        if self.phase == "confirm":
            assert self.lo is not None
            if len(self._confirms) < self.b.confirm:
                return self.lo
            if self.hi is not None and self._missed_at(self.hi) < 2:
                self.phase = "recheck"
                return self.hi
            self._stopped = CEILING if self.hi is None else PRECISE
            return None
        return None

    # --- results ----------------------------------------------------------------------

    def record(self, probe: Probe) -> None:
        if self._pending is None or abs(probe.load - self._pending) > 1e-9 * max(1, probe.load):
            raise ValueError(f"recorded load {probe.load:g}, asked {self._pending}")
        self._pending = None
        again = bool(self.probes) and self.probes[-1].phase == BUSY
        down = self.phase == "bracket" and self.lo is None  # a start that missed, halving
        remeasure = (self.phase in ("bisect", "confirm") or down) and not again
        # an unsteady probe on a busy machine may be a stall's: measured again, wherever
        if probe.unsteady and probe.busy and self._busy_left > 0 and not again:
            self._busy_left -= 1
            self.probes.append(Probe(**{**probe.__dict__, "phase": BUSY}))
            self._pending = probe.load
            return
        if not probe.meets and probe.busy and self._busy_left > 0 and remeasure:
            # the machine's, maybe: kept as evidence, not as a verdict; measured again
            self._busy_left -= 1
            self.probes.append(Probe(**{**probe.__dict__, "phase": BUSY}))
            self._pending = probe.load
            return
        probe = Probe(**{**probe.__dict__, "phase": self.phase})
        self.probes.append(probe)
        if self.phase == "recheck" and self.lo is None:  # the floor, measured again
            self.phase = "bracket"
            if probe.meets:  # the first miss there was the machine's: go on above
                self.lo = probe.load
                above = [p.load for p in self._misses() if p.load > probe.load]
                self.hi = min(above) if above else None
                if self.hi is not None:
                    self.phase = "bisect"
            return
        if self.phase == "recheck":
            if not probe.meets:  # the break repeated: it stands
                self._stopped = PRECISE
                return
            # the miss was the machine's: go on above this load
            self.lo = probe.load
            self._confirms = []
            above = [p.load for p in self._misses() if p.load > probe.load]
            self.hi = min(above) if above else None
            self.phase = "bracket" if self.hi is None else "bisect"
            return
        if self.phase == "confirm":
            if probe.meets:
                self._confirms.append(probe)
                return
            # that load passed by luck: it is a miss, and the search goes below it
            self.hi = probe.load
            self._confirms = []
            below = [p.load for p in self.probes if p.meets and p.load < probe.load]
            self.lo = max(below) if below else None
            if self.lo is None:
                # nothing lower was measured: go down as a start that misses does (a
                # miss here proves nothing below it), down to the floor
                self.phase = "bracket"
                return
            self.phase = "bisect"
            return
        if probe.meets:
            self.lo = probe.load if self.lo is None else max(self.lo, probe.load)
        else:
            self.hi = probe.load if self.hi is None else min(self.hi, probe.load)

    @property
    def done(self) -> bool:
        return bool(self._stopped)

    def _misses(self) -> list[Probe]:
        """The misses that count (not those measured again for a busy machine)."""
        return [p for p in self.probes if not p.meets and p.phase != BUSY]

    def _missed_at(self, load: float) -> int:
        """How many probes missed at this load (busy ones too: a busy miss measured
        again that missed again was seen missing twice)."""
        return sum(1 for p in self.probes if not p.meets and p.load == load)

    def _forgiven(self) -> list[Probe]:
        """Busy misses that the re-measure at their load contradicted (it met)."""
        return [
            p
            for p, nxt in zip(self.probes, self.probes[1:], strict=False)
            if p.phase == BUSY and not p.meets and nxt.load == p.load and nxt.meets
        ]

    def _unsteady(self) -> list[Probe]:
        """Probes whose own intervals disagreed (not those measured again for a busy
        machine: their repeat counts)."""
        return [p for p in self.probes if p.unsteady and p.phase != BUSY]

    def unstable(self) -> tuple[float, float] | None:
        """The loads where the verdicts contradict each other (a miss at or below a
        pass, or a busy miss its re-measure contradicted), when there are at least
        `UNSTABLE_MISSES` of them; or any probe whose own intervals disagreed (its time
        both met and clearly missed: whatever its neighbours say)."""
        unsteady = [p.load for p in self._unsteady()]
        passes = [p.load for p in self.probes if p.meets]
        if not passes and not unsteady:
            return None
        top = max(passes + unsteady)
        against = [p.load for p in self._misses() if p.load <= top]
        forgiven = [p.load for p in self._forgiven() if p.load <= top]
        if len(against) + len(forgiven) < UNSTABLE_MISSES and not unsteady:
            return None
        return min(against + forgiven + unsteady), top

    def result(self) -> Capacity:
        stopped = self._stopped or (self._spent() or "")
        lo, hi = self.lo, self.hi
        unstable = self.unstable()
        if unstable is not None:
            # what holds for sure: the highest pass below every miss
            lowest_miss = unstable[0]
            below = [p.load for p in self.probes if p.meets and p.load < lowest_miss]
            lo, hi = (max(below) if below else None), lowest_miss
            if stopped in ("", PRECISE):
                stopped = UNSTABLE
        at_lo = [p for p in self.probes if lo is not None and p.load == lo and p.meets]
        rps = [p.rps for p in at_lo]
        margin = None
        if len(rps) >= 2:
            median = sorted(rps)[len(rps) // 2]
            margin = (max(rps) - min(rps)) / 2 / median if median > 0 else None
        miss = next(
            (p for p in reversed(self._misses()) if hi is not None and p.load == hi),
            None,
        )
        why = miss.why if miss else ""
        if unstable is not None:
            miss = next((p for p in self.probes if p.load == hi and not p.meets), None)
            shaky = next((p for p in self._unsteady() if p.load == hi), None)
            why = shaky.unsteady if shaky is not None else (miss.why if miss else "")
        at_break = [p for p in self.probes if hi is not None and p.load == hi and not p.meets]
        return Capacity(
            load=lo,
            rps=(sorted(rps)[len(rps) // 2] if rps else None),
            margin=margin,
            breaks_at=hi,
            breaks_why=why,
            stopped=stopped,
            probes=list(self.probes),
            unstable=unstable,
            thin=bool(at_lo) and not any(p.enough for p in at_lo),
            starved_break=bool(at_break) and all(p.starved for p in at_break),
        )
