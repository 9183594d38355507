"""Then beside now, live: a classic experiment's figures and claims judged on the race.

A preset that replays one of the classic experiments (`presets/seed-*.toml`) carries the
original's figures and claims (`report.schema.Then`). `stackrace report` judged them
only after a bench run; in the app, the room should see which claim holds *now*. This
module turns the levels the race has measured so far (the session's level log, one
`StepResult` per stack and level) into the shape the report's judges read, and asks
the same judges (`report.claims`): one rule for a claim, whether it is judged on a
saved run or on the race in front of the room. A claim about a level not measured yet
says so ("cannot be tested here: … not measured at c=100") until the slider or a ramp
gets there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from stackrace.race.core.machine import machine_info
from stackrace.report import claims
from stackrace.report.schema import (
    SCHEMA_VERSION,
    BenchRun,
    Level,
    Memory,
    Settings,
    StackResult,
    Then,
)
from stackrace.rules.breaking import StepResult
from stackrace.rules.level import breaking_point


@dataclass(frozen=True)
class ThenNow:
    """What the strip beside the panes shows: the original's figures beside now's, and
    each claim's verdict on the race so far."""

    title: str
    figures: list[claims.FigureRow]
    verdicts: list[claims.ClaimVerdict]

    def tally(self) -> str:
        return claims.summary(self.verdicts)


def _level(step: StepResult) -> Level:
    return Level(
        concurrency=step.level,
        rate=None,
        window=step.window,
        memory_before=Memory(),
        memory_after=Memory(),
        cpu_percent=step.cpu_percent or 0.0,
        engine_cpu=0.0,
        engine_saturated=False,
        hdr="",
        cpu_wait_percent=step.cpu_wait_percent or 0.0,
    )


def live_run(then: Then, steps: dict[str, list[StepResult]], names: dict[str, str]) -> BenchRun:
    """The race so far as a run the claims' judges read (closed-loop levels only)."""
    stacks = []
    for sid, levels in steps.items():
        bp = breaking_point(levels)
        stacks.append(
            StackResult(
                name=sid,
                title=names.get(sid, sid),
                family="",
                version="",
                levels=[_level(s) for s in levels],
                breaking_point=bp.level if bp else None,
                breaking_kind=bp.kind if bp else "",
                breaking_reason=bp.reason if bp else "",
            )
        )
    # (platform.processor() runs `uname -p` in a subprocess: /proc/cpuinfo instead)
    machine = machine_info()
    return BenchRun(
        schema=SCHEMA_VERSION,
        started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        machine=machine,
        settings=Settings(),
        stacks=stacks,
        then=then,
    )


def judge_live(then: Then, steps: dict[str, list[StepResult]], names: dict[str, str]) -> ThenNow:
    run = live_run(then, steps, names)
    title = f"Then beside now: experiment {then.experiment}"
    if then.source:
        title += f" ({then.source})"
    return ThenNow(title, claims.figure_rows(run), claims.claim_verdicts(run))
