"""How busy the machine is while stackrace measures: measured, and stated with every
capacity and every tune.

    meter = NoiseMeter()
    before = await meter.quiet_cores(1.0)        # other processes' CPU before we start
    mark = meter.mark(engine_pids)
    ... a probe ...
    noise = meter.since(mark)                    # a ProbeNoise for the probe's record
    report = summarize(...)                      # the run's Noise, with its sentence

A dev box runs builds and browsers: the normal case, not an exception. What stackrace
can see of it, it measures:

- **Other processes' CPU**: the busy time of the cores stackrace may use (/proc/stat,
  per core) less what stackrace's own process tree used meanwhile (itself, its engine
  processes, the stacks it started, and the children they waited for: one pass over
  /proc, supervise/procs.tree_cpu_ticks). In cores: 0.6 means other work took 60 % of
  one core on average. Measured once before the first stack starts (the machine as it
  was) and during every probe.
- **The engine's wait for a core**: the run-queue time of the engine's processes
  (/proc/PID/schedstat) over the probe, as a share of it. An engine that waits sends
  late and reads late: that is the machine's, never the server's.
- **The stacks' wait for a core**: each level's `cpu_wait_percent` (stacks/sampler.py).
- **The A/A noise**: the same configuration at the same load measured again; its
  spread is rules/confidence.noise_sigma. Computed by the front end that has repeats.
- **Other stackrace runs** on the same cores: race/core/runlocks.py.

`summarize` makes the run's `Noise` (report/schema.py) and the sentence every output
carries; `busy` when any of it is large enough to move a ranking.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from stackrace.report.schema import BenchRun, Noise, ProbeNoise
from stackrace.rules.confidence import MIN_SIGMA, noise_sigma
from stackrace.supervise.procs import tree_cpu_ticks

# what makes a machine "busy" in a sentence: enough to move a figure by a few percent
BUSY_OTHERS_CORES = 0.2
BUSY_WAIT_PERCENT = 5.0
BUSY_SIGMA = 0.05
# the servers got a core half the time they wanted one or less: their figures are the machine's
STARVED_WAIT_PERCENT = 50.0


def _busy_ticks(cores: Sequence[int]) -> int:
    """Busy clock ticks of these cores since boot (/proc/stat: all but idle and iowait)."""
    wanted = {f"cpu{c}" for c in cores}
    total = 0
    try:
        with open("/proc/stat", "rb") as f:
            for line in f:
                parts = line.split()
                if not parts or parts[0].decode() not in wanted:
                    continue
                # user nice system idle iowait irq softirq steal
                values = [int(v) for v in parts[1:9]]
                total += sum(values) - values[3] - values[4]
    except (OSError, ValueError):
        return 0
    return total


def _wait_ns(pids: Sequence[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/schedstat", "rb") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total


@dataclass(frozen=True)
class Mark:
    t: float
    busy: int
    ours: int
    engine_pids: tuple[int, ...]
    engine_wait: int


class NoiseMeter:
    """Reads the machine's CPU and the engine's wait around each probe."""

    def __init__(self, cores: Sequence[int] | None = None) -> None:
        self.cores = sorted(cores if cores is not None else os.sched_getaffinity(0))
        self.hz = os.sysconf("SC_CLK_TCK") or 100
        self.me = os.getpid()

    def mark(self, engine_pids: Sequence[int] = ()) -> Mark:
        pids = tuple(engine_pids)
        return Mark(
            time.monotonic(), _busy_ticks(self.cores), tree_cpu_ticks(self.me), pids, _wait_ns(pids)
        )

    def since(self, mark: Mark) -> ProbeNoise:
        now = time.monotonic()
        wall = max(1e-3, now - mark.t)
        busy = (_busy_ticks(self.cores) - mark.busy) / self.hz
        ours = (tree_cpu_ticks(self.me) - mark.ours) / self.hz
        others = max(0.0, busy - ours) / wall
        waited = (_wait_ns(mark.engine_pids) - mark.engine_wait) / 1e9
        engine = 100.0 * max(0.0, waited) / wall / max(1, len(mark.engine_pids))
        return ProbeNoise(others_cores=round(others, 3), engine_wait_percent=round(engine, 2))

    async def quiet_cores(self, seconds: float = 1.0) -> float:
        """Other processes' CPU over `seconds` with nothing of ours loading (in cores)."""
        mark = self.mark()
        await asyncio.sleep(seconds)
        return self.since(mark).others_cores


def probe_flags(
    noise: ProbeNoise | None, cpu_percent: float, wait_percent: float
) -> tuple[bool, bool]:
    """A capacity probe's `busy` and `starved` (race/core/capacity_search.py `Probe`) from
    the machine over it and the stack's use of and wait for a core: one rule for bench,
    tune and the app's `k`."""
    return probe_busy(noise, wait_percent), starved(cpu_percent, wait_percent)


def probe_busy(noise: ProbeNoise | None, stack_wait_percent: float) -> bool:
    """Whether the machine disturbed a probe: other processes took `BUSY_OTHERS_CORES` of
    a core or more, or the engine or the stack waited for a core `BUSY_WAIT_PERCENT` of
    the time or more. A capacity search measures such a probe's miss again
    (race/core/capacity_search.py). Unmeasured noise (None) is not busy."""
    if noise is None:
        return False
    return (
        noise.others_cores >= BUSY_OTHERS_CORES
        or noise.engine_wait_percent >= BUSY_WAIT_PERCENT
        or stack_wait_percent >= BUSY_WAIT_PERCENT
    )


def starved(used: float, waited: float) -> bool:
    """Whether a process tree got a core half the time it wanted one or less (used and
    waited in % of one core): then its figures say more of the machine than of it."""
    share = got_share(used, waited)
    return share is not None and starved_share(share)


def starved_share(share: float) -> bool:
    """The rule of `starved` on a share already worked out (a median of probes')."""
    return share <= 100 - STARVED_WAIT_PERCENT


def got_share(used: float, waited: float) -> float | None:
    """Of the time a process tree wanted a core (it ran or it was runnable), the share
    it got one, in % (never above 100: several processes waiting at once add up to more
    than one core of waiting, which is no share of anything); None when it wanted none."""
    wanted = used + waited
    return 100.0 * used / wanted if wanted > 0 else None


def summarize(
    cores: int,
    probes: Sequence[ProbeNoise],
    stack_cpu: Sequence[tuple[float, float]],
    before: float | None = None,
    aa_sigma: float | None = None,
    aa_repeats: int = 0,
    other_runs: Sequence[str] = (),
    aa_rounds: int = 0,
) -> Noise:
    """The run's noise and its sentence. `stack_cpu`: each probe's (CPU used, waited for
    a core), % of one core, of the stack it measured.

    Every figure is said as what it is, in shares a room reads: other programs' CPU in
    cores of the machine's; the servers' and the engine's wait as the share of the time
    they wanted a core that they got one (a wait summed over processes reads "waited
    814 %", which is no share of anything); other programs' CPU never above the
    machine's cores (ticks read a moment apart can say 2.04 of 2); the A/A spread only
    when repeats measured it, with how many and how (`aa_rounds` of them in separate
    rounds, the rest probes in a row, whose spread is a floor and not the spread between
    runs), and the difference that is noise only then."""
    top_cores = float(max(1, cores))
    others = [min(top_cores, p.others_cores) for p in probes]
    before = min(top_cores, before) if before is not None else None
    engine = [min(100.0, p.engine_wait_percent) for p in probes]
    med = statistics.median(others) if others else None
    top = max(others) if others else None
    swait = statistics.median(w for _u, w in stack_cpu) if stack_cpu else None
    shares = [g for u, w in stack_cpu if (g := got_share(u, w)) is not None]
    got = statistics.median(shares) if shares else None
    ewait = statistics.median(engine) if engine else None
    busy = bool(
        (med is not None and med >= BUSY_OTHERS_CORES)
        or (before is not None and before >= BUSY_OTHERS_CORES)
        or (swait is not None and swait >= BUSY_WAIT_PERCENT)
        or (ewait is not None and ewait >= BUSY_WAIT_PERCENT)
        or (aa_sigma is not None and aa_sigma >= BUSY_SIGMA)
        or other_runs
    )
    parts = []
    of = f"of the {cores} cores" if cores > 1 else "of the one core"
    if med is not None:
        text = f"other programs used {med:.2f} {of} during the probes"
        extra = [f"{before:.2f} before the start" if before is not None else ""]
        extra.append(f"up to {top:.2f}" if top is not None and top > med + 0.05 else "")
        extra = [e for e in extra if e]
        parts.append(text + (f" ({', '.join(extra)})" if extra else ""))
    elif before is not None:
        parts.append(f"other programs used {before:.2f} {of} before the start")
    waits = []
    if got is not None:
        waits.append(f"the servers got a core {got:.0f} % of the time they wanted one")
        if starved_share(got):
            waits[-1] += (
                " (half the time or less: the figures say more of the machine than of them)"
            )
    if ewait is not None:
        waits.append(f"the engine waited for a core {ewait:.0f} % of the time")
    if waits:
        parts.append(", ".join(waits))
    if aa_sigma is not None and aa_repeats >= 2:
        parts.append(
            f"A/A measured: the same configuration at the same load, {aa_repeats} "
            f"measurements ({aa_how(aa_repeats, aa_rounds)}), varied ±{aa_sigma * 100:.0f} %"
        )
    parts.append(
        "other stackrace runs on these cores: " + "; ".join(other_runs)
        if other_runs
        else "no other stackrace run"
    )
    sentence = "; ".join(parts)
    if busy:
        sentence = f"the machine was busy: {sentence}"
        if aa_sigma is not None and aa_repeats >= 2:
            floor = 2 * max(aa_sigma, MIN_SIGMA)
            sentence += f"; differences within ±{floor * 100:.0f} % are noise"
        else:
            sentence += "; no A/A was measured, so which differences are noise is not known"
    else:
        sentence = f"a quiet machine: {sentence}"
    return Noise(
        cores=cores,
        before_others_cores=before,
        others_cores=med,
        others_cores_max=top,
        stack_wait_percent=swait,
        engine_wait_percent=ewait,
        aa_sigma=aa_sigma,
        aa_repeats=aa_repeats,
        other_runs=list(other_runs),
        busy=busy,
        sentence=sentence,
    )


def aa_how(repeats: int, in_rounds: int) -> str:
    """How an A/A spread was measured, in words: rounds apart, or probes in a row."""
    in_rounds = max(0, min(repeats, in_rounds))
    if in_rounds == 0:
        return "probes in a row: a floor, not the spread between runs"
    if in_rounds == repeats:
        return "each in a round of its own"
    return f"{in_rounds} in rounds of their own, {repeats - in_rounds} probes in a row"


def capacity_noise(result: BenchRun, before: list[float], shared: list[str]) -> Noise:
    """A capacity run's noise: the machine before and during the probes, the stacks'
    and engine's wait, the repeats of one load (its confirmations) as the A/A."""
    probes = [p for st in result.stacks if st.capacity for p in st.capacity.probes]
    groups: dict[tuple[str, float], list[float]] = {}
    rounds: dict[tuple[str, float], int] = {}  # of each group, the probes in a round
    for st in result.stacks:
        for p in st.capacity.probes if st.capacity else []:
            if p.meets:
                groups.setdefault((st.name, p.load), []).append(p.level.rps)
                rounds[(st.name, p.load)] = rounds.get((st.name, p.load), 0) + (p.phase == "round")
    repeated = [g for g in groups.values() if len(g) >= 2]
    return summarize(
        result.machine.cores,
        [p.noise for p in probes if p.noise is not None],
        [(p.level.cpu_percent, p.level.cpu_wait_percent) for p in probes],
        before=before[0] if before else None,
        aa_sigma=noise_sigma(repeated),
        aa_repeats=sum(len(g) for g in repeated),
        other_runs=shared,
        aa_rounds=sum(rounds[k] for k, g in groups.items() if len(g) >= 2),
    )
