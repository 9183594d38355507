"""End to end: the real engine against real servers, driven through the app.

Until the launcher lands the two stacks are `--url` targets: a blocking server (one
request at a time, like one gunicorn sync worker) and the asyncio test server, both
on /io-like 10 ms requests. Raising the concurrency past the blocking server's breaking
point must mark its pane and not the async one; quitting must leave no process behind.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from stackrace.engine.client import Engine
from stackrace.engine.model import EngineSettings
from stackrace.race.core.core import RaceCore
from stackrace.race.core.plan import RacePlan
from stackrace.race.core.stack_source import StacksFileSource
from stackrace.race.core.urls import UrlTarget
from stackrace.race.live.session import Session
from stackrace.settings.race_settings import RaceSettings
from stackrace.stacks.resolved import resolve_run
from stackrace.tui.app import StackraceApp
from stackrace.tui.pane import StackPane
from stackrace.tui.race import RaceScreen
from tests.helpers import TestServer, never_accepting_listener, until

SYNC_SERVER = Path(__file__).parent / "servers" / "sync_server.py"

pytestmark = pytest.mark.slow


@pytest.fixture
def servers():
    sync, async_ = TestServer(SYNC_SERVER), TestServer()
    yield sync, async_
    sync.kill()
    async_.kill()


@contextlib.asynccontextmanager
async def race_app(
    plan: RacePlan,
    panes: int,
    launcher: StacksFileSource | None = None,
    settings: EngineSettings | None = None,
) -> AsyncIterator[tuple[StackraceApp, RaceScreen, Pilot]]:
    """The app on the real engine (one process per target), open with its `panes` shown."""
    engine = Engine(settings or EngineSettings(interval=0.25, timeout=5.0), per_target=True)
    session = Session(RaceCore(engine, launcher, plan.settings))
    choices = list(launcher.catalog()) if launcher is not None else []
    app = StackraceApp(session, plan, choices, show_picker=False)
    async with app.run_test(size=(160, 48)) as pilot:
        assert await until(lambda: app.race is not None and len(app.race.panes) == panes, 10)
        assert app.race is not None
        yield app, app.race, pilot


async def test_blocking_server_breaks_async_one_does_not(servers):
    sync, async_ = servers
    plan = RacePlan(
        urls=(
            UrlTarget(f"http://127.0.0.1:{sync.port}/io?ms=10", pid=sync.proc.pid, name="sync"),
            UrlTarget(async_.url("/delay?ms=10"), pid=async_.proc.pid, name="async"),
        ),
        settings=RaceSettings(workload="io", timeout=5.0),
        concurrency=1,
    )
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    async with race_app(plan, 2) as (app, race, pilot):
        await pilot.pause()
        sync_pane = race.query_one("#pane-url1", StackPane)
        async_pane = race.query_one("#pane-url2", StackPane)
        # low load long enough to set the baseline, then 10x the clients, then 20x
        await asyncio.sleep(2.0)
        for _ in range(2):  # 1 -> 2 -> 5
            await pilot.press("plus")
        await asyncio.sleep(2.0)
        await pilot.press("plus", "plus")  # -> 10 -> 20
        broken = await until(lambda: sync_pane.has_class("-broken"), 8)
        view = race.last_view
        assert view is not None
        sync_view = next(p for p in view.panes if p.id == "url1")
        async_view = next(p for p in view.panes if p.id == "url2")
        assert broken, f"sync pane not marked: {app.session.levels.results('url1')}"
        assert "at c=" in str(race.query_one("#pane-url1 #breaking", Static).content)
        assert not async_pane.has_class("-broken"), async_view.breaking
        # the figures behind it: the async server scaled, the blocking one did not
        assert async_view.target is not None and sync_view.target is not None
        # (over the level's totals, not the last quarter second: beside the other lanes
        # one interval read 0 req/s for the async server, its engine's report late)
        assert async_view.target.total.rps > 3 * sync_view.target.total.rps
        # memory and CPU of a URL target come from its pid
        assert sync_view.resources is not None and sync_view.resources.rss > 0
        await pilot.press("q")
        await pilot.pause()
    leftovers = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert not [p for p in leftovers if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


async def test_launched_gunicorn_sync_breaks_uvicorn_does_not():
    """The real launcher: gunicorn sync (1 worker) and uvicorn on /io?ms=10."""
    launcher = StacksFileSource(defs=resolve_run(None).stacks())
    choices = {c.id: c for c in launcher.catalog()}
    for needed in ("gunicorn-sync", "uvicorn"):
        if needed not in choices or not choices[needed].available:
            pytest.skip(f"{needed} is not installed")
    plan = RacePlan(
        stacks=("gunicorn-sync", "uvicorn"),
        settings=RaceSettings(workload="io", timeout=5.0),
        concurrency=1,
    )
    async with race_app(plan, 2, launcher) as (_app, race, pilot):
        ready = await until(
            lambda: (
                race.last_view is not None
                and len(race.last_view.panes) == 2
                and all(p.state == "ready" for p in race.last_view.panes)
            ),
            20,
        )
        assert ready, race.last_view
        pids = [pid for h in launcher.handles if h.running for pid in h.running.all_pids()]
        assert pids
        await asyncio.sleep(2.0)  # c=1: the low-load baseline
        await pilot.press("plus", "plus")  # 1 -> 2 -> 5
        await asyncio.sleep(2.0)
        await pilot.press("plus", "plus")  # -> 10 -> 20
        sync_pane = race.query_one("#pane-gunicorn-sync", StackPane)
        assert await until(lambda: sync_pane.has_class("-broken"), 8)
        assert not race.query_one("#pane-uvicorn", StackPane).has_class("-broken")
        view = race.last_view
        assert view is not None
        by_id = {p.id: p.target for p in view.panes}
        uvicorn, sync = by_id["uvicorn"], by_id["gunicorn-sync"]
        assert uvicorn is not None and sync is not None
        assert uvicorn.total.rps > 3 * sync.total.rps  # (the level's, as above)
        await pilot.press("q")
        await pilot.pause()
    assert not [pid for pid in pids if psutil.pid_exists(pid)]


async def test_sync_server_at_ten_times_its_capacity_shows_its_queue_live(servers):
    """One request at a time, 10 ms each: its capacity is one client. Stepping up to c=10
    (ten times that), the pane must show the clients waiting and how long the oldest has
    waited, live, and the verdict at the level: queueing, with the wait and the service
    time as its proof, and where the queue was first seen (c=5: each waits five times
    what one takes; at c=2, twice)."""
    from stackrace.tui.slider import LevelSlider

    sync, _async = servers
    plan = RacePlan(
        urls=(UrlTarget(f"http://127.0.0.1:{sync.port}/io?ms=10", pid=sync.proc.pid, name="sync"),),
        settings=RaceSettings(workload="io", timeout=5.0),
        concurrency=1,
    )
    async with race_app(plan, 1) as (app, race, pilot):
        pane = race.query_one("#pane-url1", StackPane)
        slider = race.query_one("#level", LevelSlider)
        await asyncio.sleep(2.5)  # c=1: the low-load level
        for level in (2, 5):  # the levels where the queue starts
            slider.value = level
            await asyncio.sleep(2.5)  # a level counts after 1 s measured (0.5 s settle)
        slider.value = 10
        seen: list[str] = []

        def waiting_shown() -> bool:
            text = pane.line("waiting")
            seen.append(text)
            parts = text.split()
            return (
                len(parts) > 3
                and parts[0] == "waiting"
                and int(parts[1].replace(",", "")) >= 5
                and parts[4] == "old"
            )

        assert await until(waiting_shown, 5), seen[-3:]

        # the figure is live: how many wait, and the age of the oldest (each waits for
        # about nine others of 10 ms), in the pane as in the engine's figures
        def aged() -> bool:
            view = race.last_view
            w = view.panes[0].target.interval if view and view.panes[0].target else None
            return w is not None and w.waiting >= 5 and w.oldest_wait_us >= 40_000

        assert await until(aged, 5), race.last_view
        assert "ms old" in pane.line("waiting") or " s old" in pane.line("waiting")

        def line_now() -> str:
            return str(race.query_one("#pane-url1 #breaking", Static).content)

        # (a verdict changes once it has held 2 s: on a busy machine the totals take a
        # few seconds to settle on one side of the rule)
        assert await until(lambda: line_now().startswith("▲ QUEUEING at c=10"), 20), (
            line_now(),
            app.session.levels.results("url1"),
        )
        assert pane.has_class("-queueing")
        line = line_now()
        assert line.startswith("▲ QUEUEING at c=10 since ") and "10 wait ~" in line, line
        assert "; one takes ~" in line, line
        assert race.last_view is not None
        first = race.last_view.panes[0].breaking
        assert first is not None and first.kind == "queueing" and first.level == 5, first
        await pilot.press("q")
        await pilot.pause()


async def test_clients_stuck_in_connect_show_as_connecting():
    """A server whose accept queue is full (it never accepts; backlog 1): most clients
    never get past connect. The pane counts them as waiting and says how many of those
    are still connecting, so nobody reads the queue as requests the server holds."""
    with never_accepting_listener() as port:
        plan = RacePlan(
            urls=(UrlTarget(f"http://127.0.0.1:{port}/", name="stuck"),),
            settings=RaceSettings(workload="hello", timeout=60.0),
            concurrency=20,
        )
        # nothing times out here: on a slow machine the two written requests must still
        # be waiting and the others connecting when the pane is read (a timed-out request
        # reconnects, and the full queue would hold all 20 in connect)
        quiet = EngineSettings(interval=0.25, timeout=60.0, connect_timeout=60.0)
        async with race_app(plan, 1, settings=quiet) as (_app, race, pilot):
            pane = race.query_one("#pane-url1", StackPane)
            seen: list[str] = []

            def shown() -> bool:
                seen.append(pane.line("waiting"))
                return seen[-1].startswith("waiting 20 · ") and "connecting" in seen[-1]

            assert await until(shown, 5), seen[-3:]
            view = race.last_view
            assert view is not None and view.panes[0].target is not None
            w = view.panes[0].target.interval
            assert 17 <= w.connecting < w.waiting == 20, w
            await pilot.press("q")
            await pilot.pause()
