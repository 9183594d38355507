"""The app's `k` reads the machine as `bench --capacity` does (race/live/capacity.py): on
a server the machine starves, a miss is measured again and the answer says the misses
may be the machine's, not the server's.

The real engine and a real server (tests/servers/fixed_capacity.py: 4 workers of 20 ms,
so c ≤ 4 answer in ~20 ms), driven by the session's poll as the app drives it (no
Textual: the screen only shows the ranking's sentence, tests/tui/test_capacity_ranking.py).
The starving is the test's own (a test that needs a busy machine makes it busy): a
real-time loop spinning 90 % of every 20 ms on the server's core (tests/helpers.py
`core_taken`), so the server waits for its core most of the time it wants one, the same
on every machine. Under `mean<22ms`, 2 ms above the server's own 20 ms, every probe
misses while it spins, from c=1 (the floor: the fewest probes, ~10 s of spinning)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from stackrace.engine.client import Engine
from stackrace.engine.model import EngineSettings
from stackrace.race.core.capacity_search import BUSY
from stackrace.race.core.core import RaceCore
from stackrace.race.core.plan import RacePlan
from stackrace.race.core.urls import UrlTarget
from stackrace.race.live.session import Session
from stackrace.settings.race_settings import RaceSettings
from tests.helpers import TestServer, core_taken

pytestmark = pytest.mark.slow

FIXED = Path(__file__).parents[1] / "servers" / "fixed_capacity.py"


async def test_k_on_a_starved_server_measures_its_misses_again_and_says_whose_they_may_be():
    server = TestServer(FIXED, "--workers", "4", "--ms", "20")
    try:
        plan = RacePlan(
            urls=(UrlTarget(server.url("/work"), pid=server.proc.pid, name="fixed"),),
            settings=RaceSettings(workload="io", slo="mean<22ms", duration=3.0, timeout=5.0),
            concurrency=1,  # (the floor: the fewest probes, the least spinning)
        )
        engine = Engine(EngineSettings(interval=0.25, timeout=5.0), per_target=True)
        session = Session(RaceCore(engine, None, plan.settings))
        await session.start(plan)
        try:
            # (a period apart from the server's 20 ms: at 20 ms its timers kept landing
            # in the spinner's pause, and c=1 met once in a full run)
            with core_taken(server.proc.pid, 0.9, period=0.013):
                for _ in range(4):  # a second under the load, as a user looks first
                    await asyncio.sleep(0.25)
                    await session.poll()
                assert session.ranking.start() == ""
                live = session.ranking.search  # (the ranking lets go of it when done)
                assert live is not None
                end = time.monotonic() + 150
                while not session.ranking.finished and time.monotonic() < end:
                    await asyncio.sleep(0.25)
                    await session.poll()
            assert session.ranking.finished, live.status()
            ((_name, cap),) = session.ranking.ranked()
            (member,) = live.members.values()
            probes = member.search.probes
        finally:
            await session.stop()
    finally:
        server.kill()
    assert probes, cap.sentence
    # a miss on the busy machine was measured again before it counted
    assert any(p.phase == BUSY for p in probes), [(p.load, p.phase, p.busy) for p in probes]
    assert cap.starved_break, (cap.sentence, [(p.load, p.phase, p.starved) for p in probes])
    print(cap.sentence)
    # c=1 is the floor: no load met for sure ("cannot meet", or "unstable" should a probe
    # have caught the spinner's pauses), and the answer says whose the misses may be
    assert cap.load is None, cap.sentence
    assert "(the machine starved the server at each miss there" in cap.sentence, cap.sentence
