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
- **An interval per capacity** (`estimate`), from repetition only: each sample is one
  independent round (a fresh measurement, the candidates interleaved in a shuffled
  order), and the interval is where the *next run's* figure falls 9 times in 10: the
  rounds' spread of log(req/s) (never below `MIN_SIGMA`), × √(2/n) (this run's error
  and the next one's), × Student's t with n − 1 degrees of freedom (two rounds: 6.3,
  wide as it should be), × √(π/2) (the figure is a median). One round is no interval,
  and is said so ("one round: no interval"); an interval built inside one measurement
  (the bootstrap of probes a few seconds apart this module once made) read as a
  reproducibility it did not have: ±3 % intervals disjoint from the next run's.
  bench/interval_coverage.py measures the claim. For ranking, a capacity's standard
  error is its rounds' spread (never below the A/A noise) over √n: a configuration
  measured once is ranked with the A/A noise.
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

The same figures give the same interval (no random draw), so a resumed search decides
as the uninterrupted one did.

Pure arithmetic (no I/O, no clock); unit-tested on recorded noisy samples in
tests/unit/test_confidence.py.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

LEVEL = 0.90  # two-sided: the next run's figure inside it 9 times in 10
Z = 1.6448536269514722  # the normal quantile of (1 + LEVEL) / 2
CONFIDENCE = 0.95  # a winner beats each other candidate at least this surely
# without shared rounds, two figures measured minutes apart also differ by the drift
# between them, which their intervals do not hold: only a clear gap counts
CONFIDENCE_APART = 0.99
MIN_PAIRS = 5  # rounds shared before the paired test may carry a winner (1 − 2⁻⁵ = 97 %)
DEFAULT_SIGMA = 0.10  # the A/A noise assumed until repeats measure it (10 % of req/s)
MIN_SIGMA = 0.02  # a machine never gets credit for less noise than this
MEDIAN_SE = math.sqrt(math.pi / 2)  # a median's standard error over a mean's (normal)


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
    """A capacity: the median of its rounds, and (two rounds or more) the 90 % interval
    the next run's figure falls in; `se`: the standard error of its log, for ranking."""

    name: str
    median: float
    lo: float
    hi: float
    n: int  # rounds
    se: float = math.inf

    @property
    def interval(self) -> bool:
        """Whether `lo`–`hi` is an interval: only from two rounds or more."""
        return self.n >= 2

    @property
    def half_width(self) -> float:
        """Half the interval's width, as a share of the median (inf: no interval)."""
        if not self.interval or self.median <= 0:
            return math.inf
        return (self.hi - self.lo) / 2 / self.median

    @property
    def log_se(self) -> float:
        """The standard error of log(median), for comparing two capacities."""
        return self.se if self.median > 0 else math.inf

    def said(self) -> str:
        """'1,205 req/s (90 % interval 1,150–1,262 from 3 measurements)', or 'one round:
        no interval' (a tune's measurements: its search's answer, then one per round)."""
        if not self.interval:
            return f"{self.median:,.0f} req/s (one round: no interval)"
        return (
            f"{self.median:,.0f} req/s (90 % interval {self.lo:,.0f}–{self.hi:,.0f} from "
            f"{self.n} measurements)"
        )


# Student's t, one-sided 95 % (a two-sided 90 % interval), by degrees of freedom
_T95 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860,
        9: 1.833, 10: 1.812, 12: 1.782, 15: 1.753, 20: 1.725, 30: 1.697}  # fmt: skip


def t95(dof: int) -> float:
    """Student's t quantile for `dof` degrees of freedom (the next lower tabled, so the
    interval errs wide; the normal's beyond 30)."""
    if dof > 30:
        return Z
    return _T95[max(k for k in _T95 if k <= max(1, dof))]


def estimate(name: str, samples: Sequence[float], sigma: float | None) -> Estimate:
    """The median of `samples` (one per independent round) with the 90 % interval the
    next run's figure falls in (see the module docstring). A sample of 0 (the SLO not
    met at all in that round) counts: the interval then reaches down to 0."""
    s = sorted(samples)
    n = len(s)
    if n == 0:
        return Estimate(name, 0.0, 0.0, 0.0, 0)
    med = statistics.median(s)
    aa = max(MIN_SIGMA, sigma if sigma is not None else DEFAULT_SIGMA)
    logs = [math.log(v) for v in s if v > 0]
    spread = statistics.stdev(logs) if len(logs) >= 2 else 0.0
    # for ranking: the rounds' own spread, never below the machine's A/A noise
    se = max(spread, aa) / math.sqrt(n)
    if med <= 0 or n < 2 or not logs:
        return Estimate(name, med, med, med, n, se)
    # the next run's figure (the median of its own n rounds) differs from this one's by
    # both runs' error: √(1/n + 1/n) of one round's spread, × √(π/2) (a median varies
    # more than a mean: on a model machine the next median fell inside 88 % of the
    # intervals without it), t with n − 1 degrees of freedom
    half = t95(n - 1) * max(spread, MIN_SIGMA) * math.sqrt(2 / n) * MEDIAN_SE
    centre = statistics.fmean(logs)
    lo = 0.0 if len(logs) < n else math.exp(centre - half)
    return Estimate(name, med, min(lo, med), max(math.exp(centre + half), med), n, se)


def rounds_interval(samples: Sequence[float]) -> str:
    """A figure's interval from its rounds, in words: '90 % interval 807–961 req/s from
    3 rounds', or 'one round: no interval' (bench's levels, `--capacity`)."""
    est = estimate("", samples, None)
    if not est.interval:
        return "one round: no interval"
    return f"90 % interval {est.lo:,.0f}–{est.hi:,.0f} req/s from {est.n} rounds"


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
