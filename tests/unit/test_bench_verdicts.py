"""bench's tables and closing lines judge each level by the app's rules (report/
judged.py, stackrace.rules.level): goodput in the req/s column, the break with its p99,
"no breaking point" only with the highest level's p99 and the bound it met, and levels
the engine limited said to be not judged. Runs built in the test (no servers)."""

from __future__ import annotations

import csv
import io

from stackrace.engine.model import LatencySummary, WindowStats
from stackrace.race.bench.results import with_breaking_point
from stackrace.report import tables
from stackrace.report.schema import (
    SCHEMA_VERSION,
    BenchRun,
    Level,
    Machine,
    Memory,
    Settings,
    StackResult,
)


def level(
    c: int,
    rps: float,
    p99_us: int,
    fastest_us: int = 10_000,
    mean_us: float | None = None,
    errors: bool = False,
    engine_limit: str = "",
) -> Level:
    """A 5 s closed-loop level: `rps` answered (all 404s when `errors`), `c` in flight."""
    n = int(rps * 5)
    mean = mean_us if mean_us is not None else c / rps * 1e6
    return Level(
        concurrency=c,
        rate=None,
        window=WindowStats(
            seconds=5.0,
            sent=n + c,
            requests=n,
            ok=0 if errors else n,
            rps=rps,
            waiting=c,
            in_flight=float(c),
            failures={"http_status": n} if errors else {},
            status={404: n} if errors else {200: n},
            latency=LatencySummary(
                count=n,
                mean=mean,
                p50=int(mean),
                p90=p99_us,
                p99=p99_us,
                p999=p99_us,
                max=p99_us,
                min=fastest_us,
            ),
        ),
        memory_before=Memory(),
        memory_after=Memory(),
        cpu_percent=20.0,
        engine_cpu=30.0,
        engine_saturated=False,
        hdr="",
        fastest_us=fastest_us,
        engine_limited=bool(engine_limit),
        engine_limit=engine_limit,
    )


def run_of(*stacks: StackResult) -> BenchRun:
    run = BenchRun(
        schema=SCHEMA_VERSION,
        started="2026-11-27T00:00:00+00:00",
        machine=Machine("h", "cpu", 2, 1 << 30, "k", "os", "3.11", "0"),
        settings=Settings(workload="io"),
        stacks=list(stacks),
    )
    run.stacks = [with_breaking_point(st, run) for st in run.stacks]
    return run


def stack(name: str, *levels: Level) -> StackResult:
    return StackResult(name, name, "async", "1", list(levels), cpus=[0])


def test_404s_are_no_requests_per_second_and_fail():
    """`bench`'s req/s column once read 5,180 for a level that was 100 % 404."""
    run = run_of(stack("mine", level(10, 5180, 2_000, fastest_us=150, errors=True)))
    (row,) = tables.rows(run)
    assert row[2] == "0" and row[6].startswith("100.0%")
    assert run.stacks[0].levels[0].rps == 0.0  # the run file's rps too
    line = tables.breaking_line(run.stacks[0], run)
    assert line.startswith("mine: failing at c=10: 100.0% failed (HTTP 404); p99 there 2.0 ms")


def test_the_tail_is_named_where_the_mean_looked_fine():
    """`bench --concurrency 10,100`: gunicorn gevent's p99 at c=100 was 741 ms (the
    others 136–190 ms), yet the summary said "no breaking point". Its mean there was
    fine, its tail 74 times what one request takes: queueing, with its p99."""
    gevent = stack(
        "gunicorn-gevent[app]",
        level(10, 800, 19_000, mean_us=12_500),
        level(100, 2_500, 741_000, mean_us=30_000),
    )
    uvicorn = stack("uvicorn[app]", level(10, 900, 15_000), level(100, 6_000, 136_000))
    run = run_of(gevent, uvicorn)
    said = {st.name: tables.breaking_line(st, run) for st in run.stacks}
    assert said["gunicorn-gevent[app]"] == (
        "gunicorn-gevent[app]: queueing at c=100: p99 741 ms; one takes ~10 ms (its "
        "fastest answer); p99 there 741 ms"
    )
    # never a bare "no breaking point": the highest level's p99 and the bound it met
    assert said["uvicorn[app]"] == (
        "uvicorn[app]: no breaking point up to c=100: p99 136 ms there, within its bound "
        "of 210 ms (20× its ~10 ms service time, at least +200 ms)"
    )


def test_a_level_the_engine_limited_is_not_judged_and_the_table_says_why():
    starved = "its engine waited for a core 52% of the time (2,000µs per wake-up)"
    go = stack("go", level(100, 9_000, 40_000, fastest_us=50), level(1000, 10_300, 190_000,
               fastest_us=50, engine_limit=starved))  # fmt: skip
    run = run_of(go)
    assert run.stacks[0].breaking_point is None
    line = tables.breaking_line(run.stacks[0], run)
    assert "not judged at c=1,000: the engine was the limit (its engine waited for a core" in line
    notes = tables.notes_lines(run)
    assert f"go @ 1,000: not judged: the engine was the limit ({starved}" in " ".join(notes)
    rows = list(csv.DictReader(io.StringIO(tables.to_csv(run))))
    assert [r["state"] for r in rows] == ["keeping up", "engine-limited"]
