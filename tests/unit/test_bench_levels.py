"""Bench's level protocol on the synthetic engine: the same `run_bench` and `LevelRunner`
as a real bench, on the race core's stepped clock (race/core/clock.py), in milliseconds.

Each test states a rule of the protocol through figures that only hold if it is kept:
the models' physics (race/live/demo_model.py) make a warm-up counted, a drain skipped,
repeats not merged or the breaking rule judged on the wrong level show in the numbers.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from stackrace.race.bench.driver import run_bench
from stackrace.race.bench.protocol import BenchPlan
from stackrace.race.core.capacity_plan import CapacityPlan
from stackrace.race.live.demo import (
    TICK,
    DemoSource,
    StackModel,
    SyntheticEngine,
    synthetic_parts,
)
from stackrace.report.schema import BenchRun
from stackrace.rules.level import FAILING, QUEUEING
from stackrace.settings.race_settings import RaceSettings
from stackrace.stacks.definition import Stack, StackDef

# a JIT: 500 req/s at most (2 ms of CPU each), a third of it cold, all of it after 20 s
JIT = StackModel("jit", "async", 10_000, 10.0, 2.0, warm_s=20.0)
# eight workers of 10 ms: 800 req/s from eight connections on; a listen backlog of 8
EIGHT = StackModel("eight", "sync", 8, 10.0, 0.1)
EIGHT_SMALL_BACKLOG = StackModel("eight-small", "sync", 8, 10.0, 0.1, backlog=8)


def _stack(name: str) -> Stack:
    return Stack(name, name, StackDef(command=["true"], title=name))


def bench(
    models: dict[str, StackModel], names: list[str] | None = None, **settings: Any
) -> tuple[BenchRun, int, list[str]]:
    """Run bench on the models; the run, the engine's steps and the progress lines."""
    parts, engine = synthetic_parts(models)
    lines: list[str] = []
    plan = BenchPlan([_stack(n) for n in names or list(models)], RaceSettings(**settings))
    run = asyncio.run(run_bench(plan, progress=lines.append, parts=parts))
    return run, engine.steps, lines


def test_the_warm_up_is_load_before_the_figures_not_in_them():
    warm, _, _ = bench({"jit": JIT}, concurrency_levels=[64], warmup=20.0, duration=2.0)
    cold, _, _ = bench({"jit": JIT}, concurrency_levels=[64], warmup=0.0, duration=2.0)
    (lv_warm,) = warm.stacks[0].levels
    (lv_cold,) = cold.stacks[0].levels
    # only the measured time is in the window (plus the interval that brings its end)
    assert 2.0 <= lv_warm.window.seconds <= 2.0 + 2 * TICK
    # warmed for 20 s, the JIT serves at full speed (500 req/s ± the model's 2 % wobble);
    # cold, a third of it and growing: a warm-up counted in the figures would show both
    # the longer window and the cold start's lower rate
    assert lv_warm.rps > 0.95 * 500
    assert lv_cold.rps < 0.5 * 500


class LateEngine(SyntheticEngine):
    """Its reports after a reset reach the totals only `late` steps later, as a remote
    engine's on a busy machine did (a cluster bench's 1 s level closed on a window of
    0.0 s)."""

    late = 8  # 2 s of steps: longer than the level

    def reset_totals(self, warmup: float = 0.0, target_id: str | None = None) -> None:
        super().reset_totals(warmup, target_id)
        for t in self._each(target_id):
            t.counting_after += self.late


def test_a_level_whose_reports_come_late_is_measured_for_its_duration_all_the_same():
    engine = LateEngine({"eight": EIGHT})
    parts = dataclasses.replace(
        synthetic_parts()[0],
        engine=lambda _settings: engine,
        source=DemoSource(engine),
        clock=engine.clock,
    )
    plan = BenchPlan([_stack("eight")], RaceSettings(concurrency_levels=[8], duration=1.0))
    run = asyncio.run(run_bench(plan, progress=lambda _line: None, parts=parts))
    (lv,) = run.stacks[0].levels
    # eight workers of 10 ms at c=8: ~800 req/s, over at least three quarters of 1 s
    assert lv.window.seconds >= 0.75 and lv.window.requests > 500, lv.window


def test_a_warm_up_in_requests_goes_on_until_they_are_answered():
    run, _, _ = bench(
        {"jit": JIT}, concurrency_levels=[64], warmup=0.0, warmup_requests=6000, duration=2.0
    )
    (lv,) = run.stacks[0].levels
    assert 2.0 <= lv.window.seconds <= 2.0 + 2 * TICK
    # 6,000 answers at 170-500 req/s take well over 10 s of load: past half speed
    assert lv.rps > 0.7 * 500


def test_a_budgeted_level_starts_drained_and_sends_exactly_its_budget():
    run, _, _ = bench({"eight": EIGHT}, concurrency_levels=[8, 64], requests=1000, warmup=1.0)
    levels = run.stacks[0].levels
    assert [lv.level for lv in levels] == [8, 64]
    for lv in levels:
        w = lv.window
        # drained first: nothing of the warm-up's load is carried into the level
        assert w.carried_in == 0
        assert w.sent == 1000 and w.requests == 1000 and w.waiting == 0 and w.lost == 0


def test_rounds_measure_every_level_again_shuffled_each_warmed_up_afresh():
    """--repeat 3: rounds 2 and 3 measure every level round 1 measured again, each round
    in its own shuffled order, each level drained and warmed up in full first (a fresh
    measurement); a level's rounds are one window and carry the interval."""
    once, steps_once, _ = bench(
        {"eight": EIGHT}, concurrency_levels=[2, 8, 64], warmup=3.0, duration=2.0, repeat=1
    )
    thrice, steps_thrice, lines = bench(
        {"eight": EIGHT}, concurrency_levels=[2, 8, 64], warmup=3.0, duration=2.0, repeat=3
    )
    levels, levels1 = thrice.stacks[0].levels, once.stacks[0].levels
    assert [lv.level for lv in levels] == [2, 8, 64]
    orders = [ln.split(": ", 1)[1].split() for ln in lines if ln.startswith("round ")]
    assert len(orders) == 2 and all(sorted(int(x) for x in o) == [2, 8, 64] for o in orders)
    for lv, lv1 in zip(levels, levels1, strict=True):
        assert len(lv.samples) == 3 and len(lv1.samples) == 1
        # the three rounds added into one window: three times the time and the answers
        assert lv.window.seconds == 3 * lv1.window.seconds
        assert abs(lv.window.requests - 3 * lv1.window.requests) <= 3 * lv.level
        assert lv.window.sent == lv.window.requests + lv.window.lost + lv.window.waiting
    # each later round of each level had its full warm-up (3 s) besides its measuring
    assert (steps_thrice - steps_once) * TICK >= 2 * 3 * (3.0 + 2.0)
    # the progress says each level's interval once its rounds are in
    assert sum("90 % interval" in ln and "from 3 rounds" in ln for ln in lines) == 3


def test_the_breaking_point_is_where_requests_wait_four_times_what_one_takes():
    """Eight 10 ms workers: 800 req/s from c=8 on; at c=16 a request waits ~20 ms (twice
    its service time), at c=64 ~80 ms — queueing, by the level's own figures (req/s
    stopped growing at c=16 already: that alone is no verdict)."""
    run, _, _ = bench(
        {"eight": EIGHT}, concurrency_levels=[2, 4, 8, 16, 64], warmup=0.0, duration=2.0
    )
    res = run.stacks[0]
    assert [round(lv.rps, -2) for lv in res.levels] == [200, 400, 800, 800, 800]
    # the fastest answer of each level is its service time (the model's 10 ms)
    assert all(9_500 <= (lv.fastest_us or 0) <= 10_000 for lv in res.levels), res.levels
    assert res.breaking_point == 64 and res.breaking_kind == QUEUEING
    assert res.breaking_reason.startswith("64 wait ~80 ms each; one takes ~9.8 ms (its fastest")


def test_the_breaking_point_is_the_first_level_with_failures():
    # 8 workers + a backlog of 8: connections past 16 are refused
    run, _, _ = bench(
        {"eight-small": EIGHT_SMALL_BACKLOG},
        concurrency_levels=[2, 4, 8, 64],
        warmup=0.0,
        duration=2.0,
    )
    res = run.stacks[0]
    assert [lv.window.lost > 0 for lv in res.levels] == [False, False, False, True]
    assert res.breaking_point == 64 and res.breaking_kind == FAILING


def test_a_crash_ends_that_stack_s_levels_and_the_others_go_on():
    crashes = StackModel("crashes", "sync", 8, 10.0, 0.1, crash_at=30)
    run, _, lines = bench(
        {"crashes": crashes, "eight": EIGHT}, concurrency_levels=[2, 4, 8], warmup=1.0, duration=2.0
    )
    by_name = {st.name: st for st in run.stacks}
    assert len(by_name["eight"].levels) == 3
    crashed = by_name["crashes"]
    assert crashed.error is not None and crashed.error.startswith("crashed during level")
    assert len(crashed.levels) < 3
    assert any(line.startswith("✗ crashes: crashed during level") for line in lines)


def test_capacity_rounds_start_each_stack_afresh_in_a_shuffled_order():
    """--capacity --repeat 3: after the searches, two more rounds, each starting every
    stack again and probing it at its answer's load, the stacks in an order shuffled each
    round; the capacity is the rounds' median with their 90 % interval, said."""
    four = StackModel("four", "sync", 4, 10.0, 0.1)
    parts, _ = synthetic_parts({"eight": EIGHT, "four": four})
    lines: list[str] = []
    plan = BenchPlan(
        [_stack("eight"), _stack("four")],
        RaceSettings(
            slo="p99<50ms", concurrency_levels=[4], warmup=1.0, duration=3.0, repeat=3,
            isolation="rotate",
        ),
        capacity=CapacityPlan("p99<50ms", budget_s=120),
    )  # fmt: skip
    run = asyncio.run(run_bench(plan, progress=lines.append, parts=parts))
    orders = [ln.split(": ", 1)[1].split(" | ") for ln in lines if ln.startswith("capacity round")]
    assert len(orders) == 2 and all(sorted(o) == ["eight", "four"] for o in orders)
    # a fresh start for each stack in each later round
    assert sum("a fresh start for its round" in ln for ln in lines) == 4
    for st, rps in zip(run.stacks, (800, 400), strict=True):
        c = st.capacity
        assert c is not None and c.load is not None and len(c.rounds) == 3
        assert [p.phase for p in c.probes].count("round") == 2
        assert all(p.load == c.load for p in c.probes if p.phase == "round")
        assert c.lo is not None and c.hi is not None and c.lo <= (c.capacity or 0) <= c.hi
        assert 0.95 * rps <= (c.capacity or 0) <= 1.01 * rps
        assert "90 % interval" in c.sentence and "from 3 rounds" in c.sentence
        assert "one round: no interval" not in c.sentence


def test_one_capacity_round_says_it_has_no_interval():
    parts, _ = synthetic_parts({"eight": EIGHT})
    plan = BenchPlan(
        [_stack("eight")],
        RaceSettings(slo="p99<50ms", concurrency_levels=[4], warmup=1.0, duration=3.0),
        capacity=CapacityPlan("p99<50ms", budget_s=60),
    )
    run = asyncio.run(run_bench(plan, parts=parts))
    c = run.stacks[0].capacity
    assert c is not None and c.rounds == [] and c.lo is None
    assert "one round: no interval" in c.sentence
