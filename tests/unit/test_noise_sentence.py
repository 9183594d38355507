"""The machine's noise, stated with every capacity and tune (race/core/noise.py
`summarize`): a machine is called busy when any one thing stackrace can see of it is
large enough to move a figure, each such thing is said with its figure, in shares a room
reads (no percentage above 100 in any sentence), and the A/A spread and the difference
that is noise are said only when repeats measured them. A quiet one is said to be
quiet, with the same figures."""

from __future__ import annotations

import re
from typing import Any

import pytest

from stackrace.race.core.noise import (
    BUSY_OTHERS_CORES,
    BUSY_SIGMA,
    BUSY_WAIT_PERCENT,
    STARVED_WAIT_PERCENT,
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
        ("A/A", {"aa_sigma": BUSY_SIGMA, "aa_repeats": 3}, "3 measurements, varied ±5 %"),
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
