"""The confidence rule (rules/confidence.py) on recorded noisy samples: req/s of
configurations measured in interleaved rounds on the 2-core dev box with a build
running beside (figures as `tune` recorded them, rounded)."""

from __future__ import annotations

import pytest

from stackrace.rules.confidence import (
    CONFIDENCE,
    MIN_SIGMA,
    estimate,
    interval_confidence,
    noise_sigma,
    paired_confidence,
    rank,
)

# gunicorn-gthread on /io, five interleaved rounds each (round → req/s)
THREADS_16 = {1: 1288, 2: 1146, 3: 1251, 4: 1190, 5: 1232}
THREADS_32 = {1: 905, 2: 881, 3: 870, 4: 921, 5: 894}
THREADS_8 = {1: 1265, 2: 1170, 3: 1205, 4: 1242, 5: 1178}  # within noise of 16


def test_the_a_a_noise_is_the_pooled_spread_of_repeats() -> None:
    assert noise_sigma([[1000, 1000, 1000]]) == 0.0
    sigma = noise_sigma([[980, 1020, 1000], [400, 440]])
    assert sigma is not None and 0.02 < sigma < 0.08
    assert noise_sigma([[1000], []]) is None  # no repeat: not measured


def test_an_interval_is_never_narrower_than_the_noise_allows() -> None:
    # three repeats that happen to agree do not make a figure exact
    e = estimate("x", [1000, 1000, 1000], sigma=0.06)
    assert e.lo < 1000 < e.hi and e.half_width >= 0.05
    # one repeat: the A/A interval around it
    one = estimate("x", [1000], sigma=0.06)
    assert one.n == 1 and one.lo == pytest.approx(1000 * 2.718281828 ** (-1.645 * 0.06), rel=1e-3)
    # no noise measured yet: the assumed 10 %, and never below the floor
    assert estimate("x", [1000], sigma=None).half_width > 0.15
    assert estimate("x", [1000, 1000], sigma=0.0).half_width >= MIN_SIGMA
    # a spread bootstrap: wider than the floor
    wide = estimate("x", [800, 1200, 1000, 900, 1100], sigma=0.01)
    assert wide.lo <= 900 and wide.hi >= 1100


def test_paired_rounds_five_of_five_is_97_percent_and_four_never_95() -> None:
    conf, n = paired_confidence(THREADS_16, THREADS_32)
    assert n == 5 and conf == pytest.approx(1 - 1 / 32)
    four = {r: v for r, v in THREADS_16.items() if r <= 4}
    conf4, n4 = paired_confidence(four, THREADS_32)
    assert n4 == 4 and conf4 < CONFIDENCE
    # a round each won by the other: no confidence either way
    mixed, _ = paired_confidence(THREADS_16, THREADS_8)
    assert 0.2 < mixed < CONFIDENCE


def test_a_clear_difference_names_a_winner_with_its_confidence() -> None:
    sigma = 0.04
    ests = [
        estimate("threads=16", list(THREADS_16.values()), sigma),
        estimate("threads=32", list(THREADS_32.values()), sigma),
    ]
    r = rank(ests, {"threads=16": THREADS_16, "threads=32": THREADS_32})
    assert r.winner == "threads=16" and r.confidence is not None
    assert r.confidence >= CONFIDENCE and r.beats[0].how == "paired"


def test_leaders_within_noise_are_a_tie_not_a_ranking() -> None:
    sigma = 0.04
    pairs = {"threads=16": THREADS_16, "threads=8": THREADS_8, "threads=32": THREADS_32}
    ests = [estimate(k, list(v.values()), sigma) for k, v in pairs.items()]
    r = rank(ests, pairs)
    assert r.winner is None
    assert set(r.tied) == {"threads=16", "threads=8"}  # 32 is beaten, and left out


def test_without_shared_rounds_the_intervals_decide() -> None:
    a = estimate("a", [2900], sigma=0.05)
    b = estimate("b", [1040], sigma=0.05)
    assert interval_confidence(a, b) > 0.999
    close = estimate("c", [2800], sigma=0.05)
    assert 0.5 < interval_confidence(a, close) < CONFIDENCE
    r = rank([a, b, close])
    assert r.winner is None and r.tied == ["a", "c"]


def test_a_configuration_that_never_met_the_slo_is_beaten() -> None:
    r = rank([estimate("a", [500], 0.05), estimate("b", [0.0], 0.05)])
    assert r.winner == "a"
