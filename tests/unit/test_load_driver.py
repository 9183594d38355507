"""`stackrace load`'s driver and document, on the synthetic engine: the race core with
one member, for a time or N requests, warm-up and a stop included (race/load/driver.py),
and what it prints (report/load.py, report/load_text.py).

The real engine and a real server: tests/integration/test_load_cli.py.
"""

from __future__ import annotations

import asyncio
import json

import jsonschema
import msgspec

from stackrace.engine.histogram import LatencyHistogram
from stackrace.engine.model import LatencySummary, TargetSnapshot, WindowStats
from stackrace.race.core.core import RaceCore
from stackrace.race.live.demo import SyntheticEngine
from stackrace.race.load.driver import LoadPlan, LoadRun, Phase, WarmupCount, drive, member
from stackrace.report.load import SCHEMA_FILE, LoadFacts, buckets, load_result, schema_text
from stackrace.report.load_text import summary_lines
from stackrace.settings.race_settings import RaceSettings
from stackrace.settings.scenario import url_kinds

# not on this machine: no kernel socket dump is asked for the synthetic member
BASE = "http://10.0.0.1:8000"


def _core(concurrency: int = 10) -> tuple[RaceCore, SyntheticEngine]:
    engine = SyntheticEngine()
    core = RaceCore(
        engine,
        None,
        RaceSettings(),
        clock=engine.clock,
        concurrency=concurrency,
        requests=url_kinds(["/hello"]),
    )
    return core, engine


def _drive(core: RaceCore, plan: LoadPlan, stop_after: float | None = None) -> LoadRun:
    stop = asyncio.Event()
    phases: list[Phase] = []

    def seen(snap: object, phase: Phase) -> None:
        phases.append(phase)
        if stop_after is not None and core.clock() >= stop_after:
            stop.set()

    run = asyncio.run(drive(core, member(BASE, f"{BASE}/hello"), plan, stop, seen))
    assert phases, "no interval was seen"
    return run


def test_a_timed_load_measures_its_duration_and_every_request_is_accounted_for() -> None:
    core, _engine = _core()
    run = _drive(core, LoadPlan(duration=3.0))
    assert run.target is not None and not run.stopped and run.warmup is None
    w = run.target.total
    assert 2.9 <= w.seconds <= 3.6, w.seconds
    assert w.sent == w.requests + w.lost + w.waiting and w.requests > 100
    assert run.fastest_us is not None and run.engine_cpu


def test_n_requests_are_exactly_n_from_the_first() -> None:
    core, engine = _core(concurrency=7)
    run = _drive(core, LoadPlan(duration=None, requests=1000))
    assert run.target is not None and not run.stalled
    w = run.target.total
    assert (w.sent, w.attempts, w.waiting) == (1000, 1000, 0)
    # the budget went out with the target (TargetSpec.budget): not one request before it
    assert engine.targets[f"{BASE}/hello"].spec.budget == 1000


def test_n_requests_after_a_warm_up_are_n_and_the_warm_up_is_counted_apart() -> None:
    core, _engine = _core()
    run = _drive(core, LoadPlan(duration=None, warmup=1.0, requests=500))
    assert run.target is not None and run.warmup is not None
    w = run.target.total
    assert (w.attempts, w.waiting) == (500, 0), (w.attempts, w.waiting)
    assert run.warmup.sent > 0 and run.warmup.answered > 0


def test_a_stop_in_the_warm_up_counts_nothing_and_says_what_was_sent() -> None:
    core, _engine = _core()
    run = _drive(core, LoadPlan(duration=5.0, warmup=3.0), stop_after=1.0)
    assert run.stopped and run.in_warmup
    assert run.warmup is not None and run.warmup.sent > 0
    assert core.clock() < 3.0  # it did not wait the warm-up out


def test_a_stop_in_the_measured_time_keeps_what_was_measured() -> None:
    core, _engine = _core()
    run = _drive(core, LoadPlan(duration=30.0), stop_after=2.0)
    assert run.stopped and not run.in_warmup and run.target is not None
    assert 1.5 <= run.target.total.seconds < 3.0
    assert run.target.total.requests > 0


def _facts(**kw: object) -> LoadFacts:
    base = {
        "url": f"{BASE}/x",
        "loaded": f"GET {BASE}/x",
        "kinds": url_kinds(["/x"]),
        "concurrency": 5,
        "rate": None,
        "keepalive": True,
        "duration": 10.0,
        "warmup": 0.0,
        "requests_asked": None,
        "procs": 1,
    }
    return LoadFacts(**{**base, **kw})  # type: ignore[arg-type]


def _window(**kw: object) -> WindowStats:
    lat = LatencySummary(count=0)
    if kw.get("requests"):
        lat = LatencySummary(
            count=1, mean=200.0, p50=180, p90=250, p99=400, p999=900, max=2000, min=90
        )
    return msgspec.structs.replace(WindowStats(seconds=10.0, latency=lat), **kw)


def _run(w: WindowStats) -> LoadRun:
    t = TargetSnapshot(id="x", url=f"{BASE}/x", concurrency=5, connections=5, rate=None,
                       interval=w, total=w)  # fmt: skip
    return LoadRun("x", target=t, engine_cpu=[30.0] * 40, fastest_us=90)


def _hist() -> LatencyHistogram:
    h = LatencyHistogram()
    for v in (90, 150, 180, 180, 250, 400, 900, 2000):
        h.record(v, 100)
    return h


def test_an_all_404_load_leads_with_no_goodput_and_every_request_failed() -> None:
    w = _window(sent=148_866, waiting=5, requests=148_861, ok=0, rps=14_886.1,
                failures={"http_status": 148_861}, status={404: 148_861})  # fmt: skip
    doc = load_result(_facts(), _run(w), _hist())
    assert doc.goodput == 0.0 and doc.failed_share == 1.0
    lines = summary_lines(doc)
    # the header, how it was loaded, then success: none, and what failed
    assert lines[2].startswith("  Requests/sec: 0.00 answered with success (goodput)"), lines
    assert lines[3].startswith("  Failures: 100.00% of 148,861 requests that ended"), lines
    assert "404: 148,861" in lines[3]
    assert doc.verdict is not None and doc.verdict.state == "failing"
    assert "  Verdict: FAILING — 100.0% failed (HTTP 404)" in lines, lines
    assert lines.index(next(x for x in lines if x.lstrip().startswith("Latency "))) > 3


def test_success_leads_then_latency_status_codes_transfer_and_the_histogram() -> None:
    w = _window(sent=10_010, waiting=10, requests=10_000, ok=10_000, rps=1000.0,
                bytes=2_000_000)  # fmt: skip
    doc = load_result(_facts(), _run(w), _hist())
    text = "\n".join(summary_lines(doc))
    assert "Requests/sec: 1000.00 answered with success (goodput)" in text
    assert "Failures: none" in text
    assert "Status codes: 2xx: 10,000" in text
    assert "Transfer/sec: 195.3KiB" in text
    assert "Latency histogram (answers):" in text
    assert "Sent 10010: 10000 answered, 0 failed without an answer, 10 still waiting" in text
    assert text.index("Requests/sec") < text.index("Latency ") < text.index("Status codes")


def test_the_engine_is_said_once_from_its_judgment() -> None:
    # it waited for a core a third of the time while it wanted one: limited, whatever
    # its own CPU; one line says so, and never "not saturated" beside it
    w = _window(sent=5000, requests=5000, ok=5000, rps=500.0, engine_cpu=32.0,
                engine_wait=35.0, engine_wait_us=900.0)  # fmt: skip
    doc = load_result(_facts(), _run(w), _hist())
    text = summary_lines(doc)
    (line,) = [x for x in text if x.lstrip().startswith("Engine")]
    assert "LIMITED" in line and "--engine-cpus" in line
    assert any(x.startswith("  Verdict: LIMITED BY THE ENGINE — its engine waited") for x in text)
    assert not any("not the limit" in x or "not saturated" in x for x in text), text
    # the verdict is the same judgment's (rules/level.py weighs rules/engine.py's limit)
    assert doc.engine_limited and doc.verdict is not None and doc.verdict.state == "engine-limited"
    w = _window(sent=10, requests=10, ok=10, engine_cpu=32.0)
    calm = summary_lines(load_result(_facts(), _run(w), _hist()))
    (line,) = [x for x in calm if x.lstrip().startswith("Engine")]
    assert line.strip() == "Engine CPU: 32% of one core: not the limit"
    # two engine processes' CPU summed: said in cores, never "190% of one core"
    w = _window(sent=10, requests=10, ok=10, engine_cpu=190.0)
    two = summary_lines(load_result(_facts(), _run(w), _hist()))
    (line,) = [x for x in two if x.lstrip().startswith("Engine")]
    assert line.strip().startswith("Engine CPU: 1.9 cores") and "190" not in line


def test_the_histogram_buckets_are_round_and_add_up() -> None:
    h = _hist()
    got = buckets(h)
    assert [b.le_us for b in got] == [100, 200, 500, 1000, 2000]
    assert sum(b.count for b in got) == h.total
    wide = LatencyHistogram()
    for v in (50, 5_000, 500_000, 9_000_000):
        wide.record(v)
    assert [b.le_us for b in buckets(wide)] == [100, 1000, 10_000, 100_000, 1_000_000, 10_000_000]


def test_the_shipped_schema_is_the_documents_and_a_document_validates() -> None:
    assert SCHEMA_FILE.read_text() == schema_text(), (
        "report/load.schema.json is not LoadResult's: write it again with "
        "`python -c 'from stackrace.report.load import *; SCHEMA_FILE.write_text(schema_text())'`"
    )
    w = _window(sent=10, requests=10, ok=10, status={301: 2})
    run = _run(w)
    run.warmup = WarmupCount(5, 4, 1)
    doc = load_result(_facts(slo="p99<50ms"), run, _hist())
    jsonschema.validate(json.loads(msgspec.json.encode(doc)), json.loads(SCHEMA_FILE.read_text()))
