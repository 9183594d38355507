"""A bench run's levels judged by the rules: the app's judgment, on a saved run.

    judgments(stack, run)      # each level measured long enough: its state and proof
    breaking(stack, run)       # the first level the stack itself broke at, or None

`bench`, `report`, `tune` and the tables all read a run's verdicts through here, and
the rules are stackrace.rules.level's, the same as a live pane's: the service time from
the levels' fastest answers, the engine's limit as recorded, the stack's CPU against
its cores (the ones it was pinned to, else the machine's). A level measured while the
database was down is not judged at all (its figures are the database's).
"""

from __future__ import annotations

from stackrace.report.schema import BenchRun, Level, StackResult
from stackrace.rules.breaking import LevelVerdict, StepResult
from stackrace.rules.level import Judgment, breaking_point, judge_steps


def step_of(level: Level, stack: StackResult, cores: int) -> StepResult:
    """One level as the rules read it. A server not sampled has no CPU figure: its 0
    must not read as an idle server."""
    capacity = 100.0 * (len(stack.cpus) if stack.cpus else max(1, cores))
    return StepResult(
        level.level,
        level.window,
        cpu_percent=level.cpu_percent if stack.sampled else None,
        cpu_capacity=capacity,
        cpu_wait_percent=level.cpu_wait_percent if stack.sampled else None,
        fastest_us=level.fastest_us,
        engine_limit=level.engine_limit,
        accept_queue=level.accept_queue,
    )


def steps(stack: StackResult, run: BenchRun) -> list[StepResult]:
    """The stack's levels the rules may judge (a database fault's are left out)."""
    cores = run.machine.cores
    return [step_of(lv, stack, cores) for lv in stack.levels if not lv.db_down]


def rate_mode(run: BenchRun) -> bool:
    return run.settings.rate is not None


def judgments(stack: StackResult, run: BenchRun) -> dict[int, Judgment]:
    """Each level measured long enough, judged on its own: by level."""
    return {j.level: j for j in judge_steps(steps(stack, run), rate_mode(run))}


def breaking(stack: StackResult, run: BenchRun) -> LevelVerdict | None:
    return breaking_point(steps(stack, run), rate_mode(run))
