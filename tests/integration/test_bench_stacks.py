"""bench with the real stacks from stacks.toml, and the presets."""

from __future__ import annotations

import asyncio

from stackrace.race.bench.driver import run_bench
from stackrace.race.bench.protocol import BenchPlan
from stackrace.settings.race_settings import RaceSettings
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.variants import resolve

STACKS = load_stacks()


def test_sync_worker_breaks_before_an_async_server_on_io():
    plan = BenchPlan(
        stacks=[resolve("gunicorn-sync", STACKS), resolve("uvicorn", STACKS)],
        settings=RaceSettings(
            workload="io",
            io_ms=10,
            # c=10 proves it: one sync worker queues ten 10 ms waits (~115 ms each, 10x
            # its c=1 answer: it breaks there, "queueing") while uvicorn answers ~870
            # req/s at ~11 ms; c=100 (dropped) only loaded uvicorn harder, and put it
            # nearer a break of its own on a busy machine. 1.5 s (a level counts from
            # 1 s, rules/breaking.py) at ~85 and ~870 req/s: a 100 ms stall moves
            # neither figure near 120 req/s nor a 10x queue.
            concurrency_levels=[1, 10],
            duration=1.5,
            warmup=0.5,
            isolation="rotate",
        ),
    )
    run = asyncio.run(run_bench(plan))
    sync, async_ = run.stacks
    assert not sync.error and not async_.error
    assert sync.breaking_point is not None, sync
    # an async server that never broke counts as breaking above every level measured
    async_bp = async_.breaking_point or 10**9
    assert sync.breaking_point < async_bp, (sync.breaking_point, async_.breaking_point)
    # one sync worker on 10 ms waits cannot pass ~100 req/s; uvicorn can
    top = {s.name: max(lv.rps for lv in s.levels) for s in run.stacks}
    assert top["gunicorn-sync"] < 120 < top["uvicorn"]
