"""How sure a ranking of noisy capacities is: an interval for each from its run-to-run
variation, and the rule that names a winner or calls a tie.

    sigma = noise_sigma([[980, 1010, 1003], [412, 398]])   # the machine's A/A noise
    est = estimate("w=2", [1180, 1230, 1205], sigma)        # median, 90 % interval
    ranking = rank([est_a, est_b], pairs)                    # winner, or a tie

Two repeats seconds apart are not a confidence interval: on a shared machine a figure
moves from minute to minute (other work starts and stops, the CPU's clock changes), and
two probes in a row share that minute. So:

- **The A/A noise** (`noise_sigma`): repeated measurements of one configuration at one
  load, grouped; the pooled standard deviation of log(req/s) within the groups. It is
  the smallest difference the machine can tell apart, stated with every ranking.
- **An interval per capacity** (`estimate`): a percentile bootstrap of the median over
  its repeats (the rounds of an interleaved comparison), 90 %, never narrower than the
  A/A noise allows for that many repeats (z·σ/√n): three repeats that happen to agree
  do not make a figure exact, and a configuration measured once gets the A/A interval.
- **Paired rounds** (`paired_confidence`): the candidates of a comparison are measured
  in rounds, each once per round in a shuffled order, so a drift of the machine hits a
  round's candidates alike. The per-round log ratios of two candidates are then tested
  with the exact one-sided Wilcoxon signed-rank test (small samples, no normality
  assumed): the confidence that A beats B is 1 − p. Five rounds won out of five is
  97 %; four is at most 94 %, so fewer than `MIN_PAIRS` rounds never carry a winner by
  pairing alone.
- **The rule** (`rank`): the leader is the highest median. It is named the winner only
  when it beats every other candidate: with `CONFIDENCE` by the paired test when they
  share `MIN_PAIRS` rounds, else with `CONFIDENCE_APART` by their intervals (the
  difference of the log medians against their combined spread, normal: figures taken
  minutes apart also differ by the machine's drift, so only a clear gap counts).
  Otherwise the leader and every candidate it does not beat are a tie within noise,
  and the ranking says so.

The bootstrap draws from a generator seeded with a constant: the same figures give the
same interval, so a resumed search decides as the uninterrupted one did.

Pure arithmetic (no I/O, no clock); unit-tested on recorded noisy samples in
tests/unit/test_confidence.py.
"""

from __future__ import annotations

import functools
import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

LEVEL = 0.90  # two-sided interval of a capacity's median
Z = 1.6448536269514722  # the normal quantile of (1 + LEVEL) / 2
CONFIDENCE = 0.95  # a winner beats each other candidate at least this surely
# without shared rounds, two figures measured minutes apart also differ by the drift
# between them, which their intervals do not hold: only a clear gap counts
CONFIDENCE_APART = 0.99
MIN_PAIRS = 5  # rounds shared before the paired test may carry a winner (1 − 2⁻⁵ = 97 %)
DEFAULT_SIGMA = 0.10  # the A/A noise assumed until repeats measure it (10 % of req/s)
MIN_SIGMA = 0.02  # a machine never gets credit for less noise than this
BOOTSTRAP = 2000
_SEED = 20261127


def noise_sigma(groups: Sequence[Sequence[float]]) -> float | None:
    """The pooled standard deviation of log(value) within groups of repeats (each group:
    one configuration at one load); None when no group has two positive values."""
    num, dof = 0.0, 0
    for group in groups:
        logs = [math.log(v) for v in group if v > 0]
        if len(logs) < 2:
            continue
        mean = statistics.fmean(logs)
        num += sum((x - mean) ** 2 for x in logs)
        dof += len(logs) - 1
    if dof == 0:
        return None
    return math.sqrt(num / dof)


@dataclass(frozen=True)
class Estimate:
    """A capacity: the median of its repeats and a 90 % interval around it."""

    name: str
    median: float
    lo: float
    hi: float
    n: int  # repeats

    @property
    def half_width(self) -> float:
        """Half the interval's width, as a share of the median."""
        return (self.hi - self.lo) / 2 / self.median if self.median > 0 else math.inf

    @property
    def log_se(self) -> float:
        """The standard error of log(median) the interval implies."""
        if self.median <= 0 or self.lo <= 0:
            return math.inf
        return (math.log(self.hi) - math.log(self.lo)) / (2 * Z)


def estimate(name: str, samples: Sequence[float], sigma: float | None) -> Estimate:
    """The median of `samples` with its 90 % interval (see the module docstring). A
    sample of 0 (the SLO not met at all in that round) counts as one."""
    s = sorted(samples)
    n = len(s)
    if n == 0:
        return Estimate(name, 0.0, 0.0, 0.0, 0)
    med = statistics.median(s)
    sig = max(MIN_SIGMA, sigma if sigma is not None else DEFAULT_SIGMA)
    floor = Z * sig / math.sqrt(n)  # log half-width the noise allows for n repeats
    if med <= 0:
        return Estimate(name, 0.0, 0.0, max(s), n)
    lo, hi = med * math.exp(-floor), med * math.exp(floor)
    if n >= 2:
        b_lo, b_hi = _bootstrap(tuple(s))
        lo, hi = min(lo, b_lo), max(hi, b_hi)
    return Estimate(name, med, lo, hi, n)


@functools.lru_cache(maxsize=4096)
def _bootstrap(s: tuple[float, ...]) -> tuple[float, float]:
    """The percentile bootstrap interval of the median (a search asks for the same
    samples' interval again and again: kept)."""
    rng = random.Random(_SEED)
    meds = sorted(statistics.median(rng.choices(s, k=len(s))) for _ in range(BOOTSTRAP))
    tail = (1 - LEVEL) / 2
    return meds[int(tail * (BOOTSTRAP - 1))], meds[int((1 - tail) * (BOOTSTRAP - 1))]


def paired_confidence(a: Mapping[int, float], b: Mapping[int, float]) -> tuple[float, int]:
    """How surely A beats B over the rounds both were measured in (round → req/s): the
    exact one-sided Wilcoxon signed-rank test on log(a/b), 1 − p; and the number of
    rounds it rests on. Rounds where they were equal carry no sign and are dropped."""
    diffs = [
        math.log(a[r] / b[r]) if a[r] > 0 and b[r] > 0 else (1.0 if a[r] > 0 else -1.0)
        for r in sorted(set(a) & set(b))
        if a[r] > 0 or b[r] > 0
    ]
    diffs = [d for d in diffs if abs(d) > 1e-12]
    n = len(diffs)
    if n == 0:
        return 0.5, 0
    ranks = _ranks([abs(d) for d in diffs])
    # doubled ranks are whole numbers even where ties share a half rank
    doubled = [round(2 * r) for r in ranks]
    w_plus = sum(r for r, d in zip(doubled, diffs, strict=True) if d > 0)
    # the distribution of the sum of a random subset of the ranks: every sign equally
    # likely under "A is no better than B"
    counts = {0: 1}
    for r in doubled:
        nxt = dict(counts)
        for total, ways in counts.items():
            nxt[total + r] = nxt.get(total + r, 0) + ways
        counts = nxt
    p = sum(ways for total, ways in counts.items() if total >= w_plus) / 2**n
    return 1.0 - p, n


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def interval_confidence(a: Estimate, b: Estimate) -> float:
    """How surely A's capacity is above B's, from their intervals alone (normal on the
    log scale): for candidates not measured in the same rounds."""
    if b.median <= 0:
        return 1.0 if a.median > 0 else 0.5
    if a.median <= 0:
        return 0.0
    se = math.hypot(a.log_se, b.log_se)
    if se == 0 or math.isinf(se):
        return 0.5
    z = (math.log(a.median) - math.log(b.median)) / se
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


@dataclass(frozen=True)
class Beat:
    """The leader against one other candidate: how surely it is ahead, and how that was
    decided ("paired": over N shared rounds; "intervals": from the two intervals)."""

    other: str
    confidence: float
    how: str
    rounds: int = 0


@dataclass(frozen=True)
class Ranking:
    """Best first; `winner` only when it beats every other with `CONFIDENCE`, else
    `tied`: the leader and those it does not beat."""

    order: list[Estimate]
    winner: str | None
    confidence: float | None  # the least sure of the leader's wins (None: alone)
    tied: list[str]
    beats: list[Beat]

    @property
    def leader(self) -> Estimate | None:
        return self.order[0] if self.order else None


def beat(
    leader: Estimate, other: Estimate, pairs: Mapping[str, Mapping[int, float]] | None
) -> Beat:
    """How surely `leader` is ahead of `other` (see the module docstring)."""
    if pairs and leader.name in pairs and other.name in pairs:
        conf, n = paired_confidence(pairs[leader.name], pairs[other.name])
        if n >= MIN_PAIRS:
            return Beat(other.name, conf, "paired", n)
    return Beat(other.name, interval_confidence(leader, other), "intervals")


def beaten(b: Beat) -> bool:
    """Whether the leader beats that candidate surely enough (see the module docstring)."""
    return b.confidence >= (CONFIDENCE if b.how == "paired" else CONFIDENCE_APART)


def rank(
    estimates: Sequence[Estimate], pairs: Mapping[str, Mapping[int, float]] | None = None
) -> Ranking:
    """The ranking and its verdict: a winner with its confidence, or a tie within noise.
    `pairs`: each candidate's req/s by round, for those measured in shared rounds."""
    order = sorted((e for e in estimates if e.n > 0), key=lambda e: (-e.median, e.name))
    if not order:
        return Ranking([], None, None, [], [])
    lead = order[0]
    if len(order) == 1:
        return Ranking(order, lead.name, None, [], [])
    beats = [beat(lead, o, pairs) for o in order[1:]]
    unbeaten = [b.other for b in beats if not beaten(b)]
    if not unbeaten and lead.median > 0:
        return Ranking(order, lead.name, min(b.confidence for b in beats), [], beats)
    return Ranking(order, None, None, [lead.name, *unbeaten], beats)
