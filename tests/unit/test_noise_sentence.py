"""The machine's noise, stated with every capacity and tune (race/core/noise.py
`summarize`): a machine is called busy when any one thing stackrace can see of it is
large enough to move a figure, each such thing is said with its figure, and a busy
machine's sentence says which differences are noise. A quiet one is said to be quiet,
with the same figures."""

from __future__ import annotations

from typing import Any

import pytest

from stackrace.race.core.noise import (
    BUSY_OTHERS_CORES,
    BUSY_SIGMA,
    BUSY_WAIT_PERCENT,
    STARVED_WAIT_PERCENT,
    summarize,
)
from stackrace.report.schema import ProbeNoise


def probes(*others: float, engine: float = 0.0) -> list[ProbeNoise]:
    return [ProbeNoise(others_cores=o, engine_wait_percent=engine) for o in others]


def test_a_quiet_machine_is_said_quiet_with_its_figures() -> None:
    noise = summarize(2, probes(0.05, 0.1, 0.07), stack_waits=[1.0, 2.0], before=0.1)
    assert not noise.busy
    assert noise.sentence == (
        "a quiet machine: other processes used 0.07 of 2 cores during the probes (0.10 before "
        "the start); the stacks waited 2 % of their time for a core, the engine 0 %; "
        "A/A: no repeat measured; no other stackrace run"
    )
    assert (noise.others_cores, noise.others_cores_max, noise.before_others_cores) == (
        0.07,
        0.1,
        0.1,
    )


@pytest.mark.parametrize(
    ("why", "kw", "said"),
    [
        ("others", {"probes": probes(BUSY_OTHERS_CORES)}, "other processes used 0.20 of 2"),
        ("before", {"before": BUSY_OTHERS_CORES}, "(0.20 before the start)"),
        ("stacks", {"stack_waits": [BUSY_WAIT_PERCENT]}, "the stacks waited 5 % of their time"),
        ("engine", {"probes": probes(0.0, engine=BUSY_WAIT_PERCENT)}, "the engine 5 %"),
        ("A/A", {"aa_sigma": BUSY_SIGMA, "aa_repeats": 3}, "varied ±5 % (3 repeats)"),
        ("runs", {"other_runs": ["bench (pid 42)"]}, "on these cores: bench (pid 42)"),
    ],
)
def test_any_one_cause_makes_the_machine_busy_and_is_said(
    why: str, kw: dict[str, Any], said: str
) -> None:
    noise = summarize(2, **{"probes": probes(0.0), "stack_waits": [0.0], **kw})
    assert noise.busy, why
    assert noise.sentence.startswith("the machine was busy: "), noise.sentence
    assert said in noise.sentence, noise.sentence
    floor = 2 * max(kw.get("aa_sigma", 0.0), 0.02)
    assert noise.sentence.endswith(f"; differences within ±{floor * 100:.0f} % are noise")


def test_just_under_every_threshold_is_quiet() -> None:
    noise = summarize(
        2,
        probes(BUSY_OTHERS_CORES - 0.01, engine=BUSY_WAIT_PERCENT - 0.1),
        stack_waits=[BUSY_WAIT_PERCENT - 0.1],
        before=BUSY_OTHERS_CORES - 0.01,
        aa_sigma=BUSY_SIGMA - 0.001,
        aa_repeats=2,
    )
    assert not noise.busy, noise.sentence


def test_stacks_that_waited_more_than_they_ran_are_said_to_measure_the_machine() -> None:
    noise = summarize(1, probes(0.0), stack_waits=[STARVED_WAIT_PERCENT])
    assert "(more than they ran: the figures say more of the machine than of them)" in (
        noise.sentence
    )
    assert noise.busy
