"""What a tune found (race/bench/tune_search.py): each configuration's evidence, the outcome
with its ranking, and the verdict in one sentence: a winner only with the confidence
it beats the runner-up with (rules/confidence.py), else a tie within noise, or "not
decided" when the budget ended before the leader's neighbours or its rounds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stackrace.race.bench.tune_space import Point
from stackrace.race.core.capacity_search import Capacity, CapacitySearch, Probe
from stackrace.rules.confidence import CONFIDENCE, Estimate, Ranking

MIN_ROUNDS = 2  # interleaved rounds before a winner is named


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
