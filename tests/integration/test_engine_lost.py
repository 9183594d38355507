"""An engine process lost mid-load, on one machine: killed, or silent (SIGSTOP) past
`lost_after`. The load goes on with the process left, what the lost one had in flight
is counted `abandoned`, and the loss says where and when. (The same code meets a
cluster's lost load host: tests/cluster/test_netns_lost.py.)"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Sequence

import pytest

from stackrace.engine.channel import Command, Message, Report, Stop
from stackrace.engine.client import Engine
from stackrace.engine.link import LocalLink
from stackrace.engine.model import ABANDONED, EngineSettings, TargetSpec, WindowStats
from tests.helpers import TestServer

pytestmark = pytest.mark.slow


def balanced(w: WindowStats) -> bool:
    return w.sent == w.requests + w.lost + w.waiting


async def until(engine: Engine, what: str, predicate, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        snap = engine.latest
        if snap is not None and predicate(snap):
            return
        await asyncio.sleep(0.05)
    pytest.fail(f"phase '{what}' timed out after {timeout:g}s: {engine.latest}")


@pytest.mark.parametrize("how", ["killed", "silent"])
async def test_a_lost_engine_process_is_survived_and_accounted(server: TestServer, how: str):
    # /delay keeps requests in flight, so the lost process surely has some
    url = server.url("/delay?ms=30")
    engine = Engine(EngineSettings(), procs=2, lost_after=3.0 if how == "silent" else None)
    async with engine:
        await engine.add_target(TargetSpec(id="t", url=url, concurrency=8))
        await until(engine, "both processes load", lambda s: s.targets[0].connections == 8)
        victim = engine.engine_pids()[0]
        os.kill(victim, signal.SIGKILL if how == "killed" else signal.SIGSTOP)
        await until(engine, "the loss is declared", lambda s: bool(s.lost))
        snap = engine.latest
        assert snap is not None
        (loss,) = snap.lost
        assert loss.host == "local" and f"pid {victim}" in loss.where
        assert ("no report" in loss.why) if how == "silent" else loss.why
        assert loss.abandoned["t"] > 0  # it had requests in flight: 4 connections at 30 ms
        assert any("this machine lost at" in e and "goes on with 1" in e for e in engine.errors)
        # the load goes on: all 8 connections now on the process left, answers flowing
        t0 = snap.targets[0].total.requests
        await until(
            engine,
            "the survivor carries all 8 connections",
            lambda s: s.targets[0].connections == 8 and s.targets[0].total.requests > t0 + 50,
        )
        assert engine.engine_pids() != [] and victim not in engine.engine_pids()
        # drain, so that no request is in flight at the stop (the stop would abandon it)
        await engine.set_concurrency(0)
        await until(engine, "drained", lambda s: s.targets[0].interval.waiting == 0)
        final = await engine.stop()
    assert final is not None
    total = final.targets[0].total
    assert balanced(total), total
    assert total.failures.get(ABANDONED, 0) == loss.abandoned["t"]
    assert set(total.failures) <= {ABANDONED}
    served = server.stats()["by_path"]["/delay"]
    # the server answered every request counted answered, and perhaps some the lost
    # process sent or saw answered after its last report (never reported to us)
    assert served >= total.requests
    assert final.lost == [loss]
    # one host here: its share is the whole (the lost process's counts included)
    (share,) = engine.by_host("t").values()
    assert share.requests == total.requests and share.sent == total.sent
    assert share.failed == total.failed
    # the victim is gone (a stopped one too: discard() kills it)
    end = time.monotonic() + 10
    while time.monotonic() < end:
        try:
            os.kill(victim, 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail(f"the lost engine process {victim} is still there")


class _LateLines(LocalLink):
    """A real engine process whose lines reach the driver late after the stop, as a
    relay's can (a cluster link), or as a driver busy on a loaded core reads them: the
    process has exited (`alive` is false) while its final report is still on the way."""

    def __init__(self, index: int, cpus: Sequence[int] | None = None) -> None:
        super().__init__(index, cpus)
        self.stopping = False

    def send(self, cmd: Command) -> None:
        self.stopping = self.stopping or isinstance(cmd, Stop)
        super().send(cmd)

    async def messages(self) -> AsyncIterator[Message | str]:
        async for msg in super().messages():
            if self.stopping:
                await asyncio.sleep(0.5)  # the process exits meanwhile
            yield msg


async def test_a_final_report_read_after_the_process_exited_still_counts(server: TestServer):
    # Found under load (two test lanes on two cores): `load -c 200` against a one-at-a-
    # time server reported its 200 waiting clients as abandoned, 'the process exited',
    # in about one run of three: the driver took the exit for a loss before reading the
    # last lines. The final report is what the process had to say: it must count.
    links: list[_LateLines] = []

    def late(index: int, cpus: Sequence[int] | None) -> _LateLines:
        links.append(_LateLines(index, cpus))
        return links[-1]

    url = server.url("/delay?ms=200")  # requests surely in flight at the stop
    engine = Engine(EngineSettings(), links=late)
    async with engine:
        await engine.add_target(TargetSpec(id="t", url=url, concurrency=4))
        await until(engine, "answers flow", lambda s: s.targets[0].total.requests >= 4)
        # a report asked for just before the stop (as the driver's ticker may have): its
        # reply reaches the driver after the process exited, the final report after it
        links[0].send(Report())
        final = await engine.stop()
    assert links and not links[0].alive  # it did exit before its last lines were read
    assert final is not None
    assert final.lost == []
    total = final.targets[0].total
    assert ABANDONED not in total.failures, total.failures
    assert total.waiting == 4 and balanced(total), total
