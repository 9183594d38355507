"""What a summary says of a stack (stackrace.rules.summaries), the words bench's closing
lines, the app's summary and `stackrace report` share: a break with its tail, and never a
bare "no breaking point" — always the level it held to, its p99 and the bound it met,
the levels not judged and why, and the levels that missed the SLO."""

from __future__ import annotations

from stackrace.rules.breaking import LevelVerdict
from stackrace.rules.level import (
    CORE_LIMITED,
    ENGINE_LIMITED,
    KEEPING_UP,
    QUEUEING,
    SLO_MISSED,
    Judgment,
)
from stackrace.rules.summaries import breaking_sentence, not_judged_note, unbroken_sentence


def kept(level: int, p99_us: int | None = 26_000, service_us: float | None = 1_000) -> Judgment:
    tail = None if service_us is None else max(20 * service_us, service_us + 200_000)
    return Judgment(
        level, KEEPING_UP, "", 900.0, p99_us, 0, service_us=service_us, tail_bound_us=tail
    )


def test_a_break_names_its_level_its_proof_and_its_tail() -> None:
    v = LevelVerdict(100, QUEUEING, "100 wait ~1.1 s each", 1_200_000, 90.0)
    assert breaking_sentence(v) == "queueing at c=100: 100 wait ~1.1 s each; p99 there 1.2 s"
    assert breaking_sentence(v, rate_mode=True).startswith("queueing at 100 req/s: ")
    silent = LevelVerdict(10, "wedged", "no answer for 6 s", 0, 0.0)
    assert breaking_sentence(silent).endswith("; p99 there no answers")


def test_no_break_is_said_with_the_highest_level_its_p99_and_its_bound() -> None:
    said = unbroken_sentence([kept(10, 9_000), kept(100)])
    assert said.startswith("no breaking point up to c=100: p99 26 ms there")
    assert ", within its bound of 201 ms (20× its ~1.0 ms service time, at least +200 ms)" in said
    # without a service time there is no bound to name, and still the p99
    assert unbroken_sentence([kept(50, service_us=None)]) == (
        "no breaking point up to c=50: p99 26 ms there"
    )
    assert unbroken_sentence([]) == "no level measured long enough to judge"


def test_levels_not_judged_and_slo_misses_are_said_too() -> None:
    engine = Judgment(200, ENGINE_LIMITED, "its engine waited for a core 52% of the time", 0, 0, 0)
    core = Judgment(400, CORE_LIMITED, "a share of cpu 1 · queue", 0, 0, 0)
    missed = Judgment(100, SLO_MISSED, "p99 60 ms ≥ 50 ms", 900.0, 60_000, 0)
    said = unbroken_sentence([kept(10), missed, engine, core])
    parts = said.split("; ")
    assert parts[0].startswith("no breaking point up to c=100: p99 60 ms there")  # SLO_MISSED kept
    assert (
        parts[1]
        == "not judged at c=200, c=400: a busy core was the limit (a share of cpu 1 · queue)"
    )
    assert parts[2] == "missed the SLO at c=100 (p99 60 ms ≥ 50 ms)"
    only_engine = unbroken_sentence([engine])
    assert only_engine == (
        "not judged at c=200: the engine was the limit "
        "(its engine waited for a core 52% of the time)"
    )
    assert not_judged_note(engine).startswith("not judged: the engine was the limit (")
    assert not_judged_note(core) == "not judged: a busy core was the limit (a share of cpu 1)"
    assert not_judged_note(kept(10)) == ""
