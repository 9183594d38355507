"""Reports and the regression gate on runs built in the test (no servers needed)."""

from __future__ import annotations

import re

import jsonschema
import msgspec
import pytest

from stackrace.engine.histogram import LatencyHistogram
from stackrace.engine.model import LatencySummary, WindowStats
from stackrace.report import chart, gate, tables, thresholds
from stackrace.report.schema import (
    SCHEMA_VERSION,
    BenchRun,
    Level,
    Machine,
    Memory,
    Settings,
    StackResult,
    dumps,
    json_schema,
    loads,
)


def level(
    c: int,
    rps: float,
    p99: int,
    failures: dict[str, int] | None = None,
    samples: list[float] | None = None,
) -> Level:
    h = LatencyHistogram()
    h.record(p99 // 2, 98)
    h.record(p99, 2)
    answered = int(rps * 5)
    lost = sum(n for k, n in (failures or {}).items() if k not in ("http_status", "invalid_body"))
    return Level(
        concurrency=c,
        rate=None,
        window=WindowStats(
            seconds=5.0,
            sent=answered + lost,
            requests=answered,
            ok=answered,
            rps=rps,
            latency=LatencySummary(
                count=100, p50=p99 // 2, p90=p99 // 2, p99=p99, p999=p99, max=p99, min=1_000
            ),
            failures=failures or {},
            in_flight=float(c),  # a closed loop of c connections
        ),
        memory_before=Memory(rss=10 << 20, uss=8 << 20),
        memory_after=Memory(rss=12 << 20, uss=9 << 20),
        cpu_percent=95.0,
        engine_cpu=40.0,
        engine_saturated=False,
        hdr=h.encode_base64(),
        samples=samples or [rps],
    )


def make_run(sync_rps: float = 1000.0, sync_fail: dict[str, int] | None = None) -> BenchRun:
    return BenchRun(
        schema=SCHEMA_VERSION,
        started="2026-11-22T12:00:00Z",
        machine=Machine(
            hostname="h",
            cpu_model="cpu",
            cores=2,
            memory_bytes=1 << 34,
            kernel="6",
            os="Debian 12",
            python="3.11",
            stackrace="0.1.0",
        ),
        settings=Settings(
            stacks=["sync", "async"],
            workload="io",
            path="/io?ms=10",
            concurrency_levels=[10, 100],
            duration=5.0,
            warmup=1.0,
        ),
        stacks=[
            StackResult(
                name="sync",
                title="gunicorn sync",
                family="sync",
                version="23",
                levels=[level(10, sync_rps, 12_000), level(100, sync_rps, 150_000, sync_fail)],
                breaking_point=100,
                breaking_reason="p99 12.5× its low-load value",
            ),
            StackResult(
                name="async",
                title="uvicorn",
                family="async",
                version="0.30",
                levels=[level(10, 900.0, 11_000), level(100, 8000.0, 13_000)],
            ),
        ],
    )


def test_json_round_trip_and_schema_validation():
    run = make_run()
    data = dumps(run)
    assert loads(data) == run
    jsonschema.validate(msgspec.json.decode(data), json_schema())


def test_unknown_schema_version_is_refused():
    raw = msgspec.json.decode(dumps(make_run()))
    raw["schema"] = 99
    with pytest.raises(ValueError, match="schema version 99"):
        loads(msgspec.json.encode(raw), "old.json")


def test_markdown_has_a_row_per_stack_and_level():
    md = tables.markdown(make_run())
    table_rows = [line for line in md.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(table_rows) == 1 + 4
    assert "| sync | 100 ✗ |" in md
    # judged by the rules: 100 clients at 1,000 req/s wait ~100 ms, a hundred times the
    # 1 ms one takes (95 % CPU of the machine's two cores: not CPU-bound)
    assert "sync: queueing at c=100: 100 wait ~100 ms each; one takes ~1.0 ms" in md, md
    assert "async: no breaking point up to c=100: p99 13 ms there" in md


def test_csv_rows():
    lines = tables.to_csv(make_run()).strip().splitlines()
    assert len(lines) == 1 + 4
    assert lines[0].startswith("stack,concurrency")


def test_chart_is_svg_with_every_stack():
    svg = chart.svg(make_run())
    assert svg.startswith("<svg") and svg.count("<polyline") == 4
    assert ">sync<" in svg and ">async<" in svg


def test_gate_rules_parse():
    rules = gate.parse_rules("qps<-10%, p99>+25%, failures>0.1%, p99>200ms")
    assert [(r.metric, r.op, r.relative, r.value) for r in rules] == [
        ("qps", "<", True, -0.10),
        ("p99", ">", True, 0.25),
        ("failures", ">", False, 0.001),
        ("p99", ">", False, 200_000.0),
    ]
    with pytest.raises(ValueError, match="bad --fail-on rule"):
        gate.parse_rules("speed<fast")


def test_gate_passes_identical_and_fails_regression():
    rules = gate.parse_rules("qps<-10%,p99>+25%,failures>0.1%")
    base = make_run()
    assert gate.gate_verdict(make_run(), base, rules).ok
    slower = gate.gate_verdict(make_run(sync_rps=700.0), base, rules)
    assert not slower.ok
    assert any("sync @ c=10: qps" in f and "-30.0%" in f for f in slower.failed)
    failing = gate.gate_verdict(make_run(sync_fail={"timeout": 50}), base, rules)
    assert any("failures" in f for f in failing.failed)


def test_gate_within_spread_is_uncertain_not_failed():
    rules = gate.parse_rules("qps<-10%")
    base = make_run()
    for st in base.stacks:
        for lv in st.levels:
            lv.samples = [lv.rps * 0.8, lv.rps, lv.rps * 1.2]
    v = gate.gate_verdict(make_run(sync_rps=880.0), base, rules)
    assert v.ok and ("sync", 10) in v.uncertain


def test_a_run_with_http_status_codes_reads_back():
    # JSON object keys are strings: the int keys of `status` must come back as ints
    run = make_run(sync_fail={"http_status": 7})
    run.stacks[0].levels[0].window.status = {503: 7, 200: 10}
    again = loads(dumps(run))
    assert again.stacks[0].levels[0].window.status == {503: 7, 200: 10}


def test_rounds_show_their_interval_and_a_wide_one_is_marked():
    """Three rounds: the 90 % interval of the next run's figure in brackets (t with 2
    degrees of freedom over the rounds' spread: far wider than their range when they
    differ by 40 %; never narrower than the 2 % floor when they agree)."""
    run = make_run()
    run.settings.rounds = True
    sync_low, sync_high = run.stacks[0].levels
    sync_low.samples = [900.0, 1000.0, 1300.0]  # 40 % apart: a range, not a point
    sync_high.samples = [990.0, 1000.0, 1010.0]  # 2 %: quiet
    assert sync_low.spread == pytest.approx(0.4) and sync_high.spread == pytest.approx(0.02)
    md = tables.markdown(run)
    assert "| sync | 10 † | 1,000 (598–1,856) |" in md
    assert "| sync | 100 ✗ | 1,000 (942–1,062) |" in md  # no † of its own
    assert "sync @ 10: its 3 rounds differ by 40% (900–1,300 req/s)" in md
    assert "measured in up to 3 rounds" in md and "90 % interval" in md
    header, first = tables.to_csv(run).splitlines()[:2]
    fields = dict(zip(header.split(","), first.split(","), strict=True))
    assert (fields["repeats"], fields["rps_min"], fields["rps_max"]) == ("3", "900.0", "1300.0")
    # a run from before rounds (repeats in a row) shows its repeats' range, no interval
    run.settings.rounds = False
    md = tables.markdown(run)
    assert "| sync | 10 † | 1,000 (900–1,300) |" in md and "90 % interval" not in md
    assert "sync @ 10: its 3 repeats differ by 40% (900–1,300 req/s)" in md
    assert "3 times in a row (a run from before rounds)" in md
    assert run.stacks[1].levels[0].spread == 0.0  # measured once: no spread


def unanswered() -> Level:
    """A level where every request timed out: no answer, so no latency at all."""
    return Level(
        concurrency=10,
        rate=None,
        window=WindowStats(seconds=5.0, sent=40, failures={"timeout": 40}),
        memory_before=Memory(),
        memory_after=Memory(),
        cpu_percent=0.0,
        engine_cpu=1.0,
        engine_saturated=False,
        hdr="",
    )


def test_threshold_terms_parse_with_their_units():
    terms = thresholds.parse_terms("p99>50ms, failures>=0.1%, rss>200MiB, qps<5000, cpu>80%")
    assert [(t.metric, t.op, t.relative, t.value) for t in terms] == [
        ("p99", ">", False, 50_000.0),
        ("failures", ">=", False, 0.001),
        ("rss", ">", False, 200 * 1024**2),
        ("qps", "<", False, 5000.0),
        ("cpu", ">", False, 80.0),
    ]
    for bad, why in [
        ("p99>fast", "bad --slo rule"),
        ("qps<5000ms", "qps takes a bare number"),
        ("failures>1", "failures takes %"),
        ("p99>+25ms", "a relative change is given in %"),
    ]:
        with pytest.raises(thresholds.TermError, match=re.escape(why)):
            thresholds.parse_terms(bad, "--slo")


def test_a_level_without_answers_has_no_latency_and_never_passes_on_it():
    """The same term read two ways (a --fail-on failure, an SLO to meet): an unknown p99
    is neither a pass nor a 0 µs."""
    lv = unanswered()
    (term,) = thresholds.parse_terms("p99>50ms")
    reading = thresholds.evaluate(lv, term)
    assert reading.value is None and reading.holds is None
    assert reading.shown() == "p99 unknown (no answers) (rule p99>50ms)"
    assert thresholds.evaluate(lv, thresholds.parse_term("failures>0.1%")).holds is True
    run = make_run()
    run.stacks[0].levels[0] = unanswered()
    verdict = gate.gate_verdict(run, None, gate.parse_rules("p99>50ms"))
    assert not verdict.ok and not verdict.baseline
    assert "sync @ c=10: p99 unknown (no answers) (rule p99>50ms)" in verdict.failed
    assert lv.failed_entirely and not lv.answered
    # every request still waiting at the end is a stalled server (queueing), not a failed
    # run: the breaking-point rule judges it
    stalled = unanswered()
    stalled.window = WindowStats(seconds=5.0, sent=200, waiting=200)
    assert not stalled.failed_entirely and not stalled.answered
    row = tables.rows(run)[0]
    assert row[3:6] == ["no answers", "", ""]


def test_rules_without_a_baseline_must_be_absolute():
    assert gate.check_rules(None, None) == []  # nothing asked: nothing judged
    assert len(gate.check_rules(None, "base.json")) == 3  # the default rules
    assert [r.text for r in gate.check_rules("p99>50ms", None)] == ["p99>50ms"]
    with pytest.raises(ValueError, match=r"--fail-on qps<-10%: a relative rule"):
        gate.check_rules("qps<-10%,p99>50ms", None)
    passed = gate.gate_verdict(make_run(), None, gate.parse_rules("p99>1s"))
    assert passed.ok and passed.levels == 4 and passed.compared == 0
    assert gate.verdict_lines(passed, None) == [
        "gate passed: 4 checks on 4 levels (absolute rules, no baseline)"
    ]


def test_a_capacity_most_rounds_missed_is_said_not_to_hold() -> None:
    """bench --capacity --repeat 3 on a busy box: the search met at c=32, rounds 2 and 3
    missed there. The median is 0 req/s, and the sentence must not say "meets … up to
    c=32 (0 req/s …)" as if it held: it says it did not hold across rounds."""
    from stackrace.race.core.capacity_plan import with_rounds
    from stackrace.report.schema import CapacityProbe, CapacityResult

    def probe(meets: bool) -> CapacityProbe:
        return CapacityProbe(
            load=32, meets=meets, why="" if meets else "p99 99ms ≥ 75 ms", phase="round",
            answers=3_000, enough=True, seconds=5.0, figures={}, level=level(32, 550.0, 99_000),
        )  # fmt: skip

    found = CapacityResult(
        slo="p99<75ms", mode="concurrency", load=32, capacity=603.0, margin=None,
        breaks_at=45, breaks_why="p99", stopped="precise", needed_answers=1_000,
        precision=0.2,
        sentence="fixed: meets p99 < 75 ms up to c=32 (603 req/s; one round: no interval)",
    )  # fmt: skip
    missed = with_rounds(found, [probe(False), probe(False)])
    assert missed.capacity == 0 and "not across rounds" in missed.sentence
    assert "no capacity that holds" in missed.sentence and "(0 req/s" not in missed.sentence
    assert "missed the SLO there in 2 of 3 rounds" in missed.sentence
    held = with_rounds(found, [probe(True), probe(False)])
    assert held.capacity == 550.0 and "(550 req/s; " in held.sentence
    assert "not across rounds" not in held.sentence
