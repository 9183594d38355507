"""The machine's noise, stated with every capacity and tune (race/core/noise.py
`summarize`): a machine is called busy when any one thing stackrace can see of it is
large enough to move a figure, each such thing is said with its figure, in shares a room
reads (no percentage above 100 in any sentence), and the A/A spread and the difference
that is noise are said only when repeats measured them. A quiet one is said to be
quiet, with the same figures."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from stackrace.race.core.noise import (
    BUSY_OTHERS_CORES,
    BUSY_SIGMA,
    BUSY_WAIT_PERCENT,
    STARVED_WAIT_PERCENT,
    aa_how,
    got_share,
    summarize,
)
from stackrace.report.schema import ProbeNoise


def probes(*others: float, engine: float = 0.0) -> list[ProbeNoise]:
    return [ProbeNoise(others_cores=o, engine_wait_percent=engine) for o in others]


def percents(sentence: str) -> list[float]:
    return [float(x) for x in re.findall(r"(\d+(?:\.\d+)?) ?%", sentence)]


def test_a_quiet_machine_is_said_quiet_with_its_figures() -> None:
    noise = summarize(2, probes(0.05, 0.1, 0.07), [(98.0, 1.0), (98.0, 2.0)], before=0.1)
    assert not noise.busy
    assert noise.sentence == (
        "a quiet machine: other programs used 0.07 of the 2 cores during the probes (0.10 "
        "before the start); the servers got a core 98 % of the time they wanted one, the "
        "engine waited for a core 0 % of the time; no other stackrace run"
    )
    assert (noise.others_cores, noise.others_cores_max, noise.before_others_cores) == (
        0.07,
        0.1,
        0.1,
    )


@pytest.mark.parametrize(
    ("why", "kw", "said"),
    [
        ("others", {"probes": probes(BUSY_OTHERS_CORES)}, "other programs used 0.20 of the 2"),
        ("before", {"before": BUSY_OTHERS_CORES}, "(0.20 before the start)"),
        (
            "stacks",
            {"stack_cpu": [(95.0, BUSY_WAIT_PERCENT)]},
            "the servers got a core 95 % of the time they wanted one",
        ),
        ("engine", {"probes": probes(0.0, engine=BUSY_WAIT_PERCENT)}, "for a core 5 % of"),
        (
            "A/A",
            {"aa_sigma": BUSY_SIGMA, "aa_repeats": 3},
            "3 measurements (probes in a row: a floor, not the spread between runs), varied ±5 %",
        ),
        ("runs", {"other_runs": ["bench (pid 42)"]}, "on these cores: bench (pid 42)"),
    ],
)
def test_any_one_cause_makes_the_machine_busy_and_is_said(
    why: str, kw: dict[str, Any], said: str
) -> None:
    noise = summarize(2, **{"probes": probes(0.0), "stack_cpu": [(50.0, 0.0)], **kw})
    assert noise.busy, why
    assert noise.sentence.startswith("the machine was busy: "), noise.sentence
    assert said in noise.sentence, noise.sentence
    if "aa_sigma" in kw:
        floor = 2 * kw["aa_sigma"]
        assert noise.sentence.endswith(f"; differences within ±{floor * 100:.0f} % are noise")
    else:
        assert "A/A measured" not in noise.sentence
        assert "±" not in noise.sentence, "a spread never measured is never printed"
        assert noise.sentence.endswith(
            "no A/A was measured, so which differences are noise is not known"
        )


def test_just_under_every_threshold_is_quiet() -> None:
    noise = summarize(
        2,
        probes(BUSY_OTHERS_CORES - 0.01, engine=BUSY_WAIT_PERCENT - 0.1),
        [(90.0, BUSY_WAIT_PERCENT - 0.1)],
        before=BUSY_OTHERS_CORES - 0.01,
        aa_sigma=BUSY_SIGMA - 0.001,
        aa_repeats=2,
    )
    assert not noise.busy, noise.sentence


def test_servers_that_got_a_core_half_the_time_or_less_are_said_to_measure_the_machine() -> None:
    noise = summarize(1, probes(0.0), [(40.0, 40.0 * STARVED_WAIT_PERCENT / 50)])
    assert "the servers got a core 50 % of the time they wanted one (half the time or less" in (
        noise.sentence
    )
    assert "other programs used 0.00 of the one core" in noise.sentence
    assert noise.busy


def test_waits_summed_over_processes_never_read_above_100_percent() -> None:
    """The sentence the issue saw ("the stacks waited 332 % / 814 % of their time for a
    core"): eight workers waiting on one core sum to 814 % of a core; said as the share
    of the time they wanted a core that they got one, it is a share again."""
    noise = summarize(2, probes(1.3, 1.3, engine=140.0), [(60.0, 332.0), (95.0, 814.0)], before=1.2)
    assert all(x <= 100 for x in percents(noise.sentence)), noise.sentence
    assert "other programs used 1.30 of the 2 cores" in noise.sentence
    assert "the servers got a core 13 % of the time they wanted one" in noise.sentence
    assert "waited 332" not in noise.sentence and "814" not in noise.sentence


@pytest.mark.parametrize(
    ("used", "waited", "got"), [(0.0, 0.0, None), (50, 50, 50.0), (10, 990, 1.0)]
)
def test_got_share_is_a_share(used: float, waited: float, got: float | None) -> None:
    assert got_share(used, waited) == got


def test_the_a_a_says_how_it_was_measured() -> None:
    """Rounds apart or probes in a row: the reader must know which spread it is."""
    assert aa_how(6, 6) == "each in a round of its own"
    assert aa_how(9, 6) == "6 in rounds of their own, 3 probes in a row"
    assert aa_how(3, 0).startswith("probes in a row")
    noise = summarize(2, probes(0.5), [(50.0, 0.0)], aa_sigma=0.06, aa_repeats=9, aa_rounds=6)
    assert "9 measurements (6 in rounds of their own, 3 probes in a row), varied ±6 %" in (
        noise.sentence
    )


def test_other_programs_never_use_more_cores_than_the_machine_has() -> None:
    """/proc/stat's ticks and our own tree's, read a moment apart, can add up to a hair
    more than the machine: never said as "2.04 of the 2 cores"."""
    noise = summarize(2, probes(2.04, 2.1), [(50.0, 10.0)], before=2.3)
    assert "other programs used 2.00 of the 2 cores during the probes" in noise.sentence
    assert "2.30" not in noise.sentence and "2.04" not in noise.sentence


def test_no_sentence_says_a_share_above_100_percent_or_more_cores_than_there_are() -> None:
    """Whatever the figures (a seeded sweep over busy, starved and summed-up inputs),
    every percentage is a share (≤ 100) and other programs' cores fit the machine."""
    rng = random.Random(47)
    for _ in range(500):
        cores = rng.choice([1, 2, 4])
        noise = summarize(
            cores,
            probes(*(rng.uniform(0, cores * 1.2) for _ in range(3)), engine=rng.uniform(0, 300)),
            [(rng.uniform(0, 400), rng.uniform(0, 900)) for _ in range(3)],
            before=rng.choice([None, rng.uniform(0, cores * 1.3)]),
            aa_sigma=rng.choice([None, rng.uniform(0, 0.5)]),
            aa_repeats=rng.randint(0, 9),
            aa_rounds=rng.randint(0, 9),
        )
        assert all(x <= 100 for x in percents(noise.sentence)), noise.sentence
        used = [float(x) for x in re.findall(r"(\d+\.\d+) (?:of the|before)", noise.sentence)]
        assert all(u <= cores for u in used), noise.sentence
        # the A/A and the noise floor only when measured
        measured = noise.aa_sigma is not None and noise.aa_repeats >= 2
        assert ("A/A measured" in noise.sentence) == measured, noise.sentence
        assert ("are noise" in noise.sentence and "not known" not in noise.sentence) == (
            measured and noise.busy
        ), noise.sentence


def test_an_engine_saturated_says_a_share_of_its_core() -> None:
    """Two engine processes' CPU summed (190 %), or one read a tick late (104 %): the
    sentence says each process's share of its core, never above 100."""
    from stackrace.engine.model import WindowStats
    from stackrace.rules.engine import engine_limit

    assert engine_limit(WindowStats(seconds=1.0, engine_cpu=190.0), True, procs=2) == (
        "engine saturated (95% of its core)"
    )
    assert "(100% of its core)" in engine_limit(WindowStats(seconds=1.0, engine_cpu=104.0), True)
