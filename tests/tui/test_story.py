"""The story a pane tells: verdict kinds with their proof, tied to their level; waiting
clients and the timeout; plain-language annotations; errors never shown as throughput;
rate mode behind schedule; the demo labelled and obeying the same physics."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from stackrace.engine.histogram import SparseHistogram
from stackrace.engine.model import HTTP_STATUS, WindowStats
from stackrace.race.live.demo import MODELS, SyntheticEngine
from stackrace.tui.bignum import BigNumber
from stackrace.tui.pane import StackPane
from stackrace.tui.slider import LevelSlider
from tests.tui.conftest import Race, open_race, plan, subtitle


async def _level(race: Race, n: int, steps: int = 12) -> None:
    await race.session.set_level(n)
    await race.advance(steps)


# a synthetic target's window of one step: its figures and its histogram
Window = Callable[[int], tuple[WindowStats, SparseHistogram]]


def pane(race: Race, pid: str) -> StackPane:
    return race.screen.query_one(f"#pane-{pid}", StackPane)


async def test_each_verdict_kind_has_its_colour_its_name_and_its_proof():
    async for race in open_race(plan(stacks=("gunicorn-sync", "uvicorn", "uwsgi"), concurrency=1)):
        await race.advance(12)
        for n in (5, 20, 100):
            await _level(race, n)
        # one sync worker behind a 10 ms wait: clients queue, req/s flat, CPU idle
        sync = pane(race, "gunicorn-sync")
        assert sync.has_class("-queueing") and not sync.has_class("-saturated")
        line = race.text("#pane-gunicorn-sync #breaking")
        # its wait and its service time first; since when it holds when there is room
        assert line.startswith("▲ QUEUEING at c=100")
        assert "100 wait ~1.1 s each; one takes ~11 ms (its fastest answer, at c=1)" in line
        assert "requests queued, each waits ~1.1 s" in race.text("#pane-gunicorn-sync #annotation")
        await _level(race, 500)
        # uvicorn on one core: CPU-bound, serving as fast as the core allows
        uvi = pane(race, "uvicorn")
        assert uvi.has_class("-saturated")
        line = race.text("#pane-uvicorn #breaking")
        assert line.startswith("▲ SATURATED at c=500 since 0:")
        assert " · CPU 9" in line and "% of 1 core" in line
        assert "CPU-bound" in race.text("#pane-uvicorn #annotation")
        # uWSGI past its listen queue of 100: refused connections, a failure
        assert pane(race, "uwsgi").has_class("-failing")
        assert "failed (refused)" in race.text("#pane-uwsgi #breaking")
        # never two states at once, and no tick anywhere
        for p in race.screen.panes.values():
            assert sum(p.has_class(f"-{k}") for k in ("failing", "queueing", "saturated")) <= 1
            assert "✓" not in str(p.query_one("#breaking").render())


async def test_a_verdict_belongs_to_its_level_and_clears_when_the_load_drops():
    async for race in open_race(plan(stacks=("gunicorn-sync",), concurrency=1)):
        await race.advance(12)
        await _level(race, 20)
        assert pane(race, "gunicorn-sync").has_class("-broken")
        await _level(race, 1, steps=2)
        # a new level is not judged before it was measured: no verdict, no tick
        assert race.text("#pane-gunicorn-sync #breaking").startswith("… measuring at c=1")
        await race.advance(14)
        sync = pane(race, "gunicorn-sync")
        assert not sync.has_class("-broken")
        line = race.text("#pane-gunicorn-sync #breaking")
        assert line.startswith("✓ keeping up at c=1") and "broke first at c=20" in line


async def test_a_single_level_is_judged_by_itself_the_same_on_every_path():
    # started straight at c=50 (--go): the level's own figures judge it — a request
    # waits about what one takes — and the same after c=1 and back
    async for race in open_race(plan(stacks=("uvicorn", "gunicorn-sync"), concurrency=50)):
        await race.advance(14)
        line = race.text("#pane-uvicorn #breaking")
        assert line.startswith("✓ keeping up at c=50 · a request waits ~"), line
        assert "one takes ~10 ms (its fastest answer)" in line
        first = race.text("#pane-gunicorn-sync #breaking")
        assert first.startswith("▲ QUEUEING at c=50"), first
        await _level(race, 1, steps=14)
        assert race.text("#pane-uvicorn #breaking").startswith("✓ keeping up at c=1")
        await _level(race, 50, steps=14)
        assert race.text("#pane-uvicorn #breaking").startswith("✓ keeping up at c=50")
        assert race.text("#pane-gunicorn-sync #breaking").startswith("▲ QUEUEING at c=50")


async def test_a_queue_reads_as_a_queue_not_as_health():
    async for race in open_race(plan(stacks=("gunicorn-sync",), concurrency=1000)):
        await race.advance(24)
        failures = pane(race, "gunicorn-sync").line("failures")
        assert "none" not in failures or "none yet" in failures
        waiting = pane(race, "gunicorn-sync").line("waiting")
        assert waiting.startswith("waiting 1,000 · ") and "old" in waiting
        assert "timeout 10s" in waiting
        assert "timeout 10s" in race.text("#status-line")
        # each client waits ~1000 / 90 req/s ≈ 9 to 11 s: the sentence says so
        note = race.text("#pane-gunicorn-sync #annotation")
        assert "timeout" in note or ("1,000 requests queued" in note and " s " in note)


async def test_http_errors_are_not_throughput():
    async for race in open_race(plan(stacks=("uvicorn",), concurrency=10)):
        await race.advance(8)
        target = race.engine.targets["uvicorn"]
        window = target.window

        def all_404(step: int, window: Window = window) -> tuple[WindowStats, SparseHistogram]:
            w, hist = window(step)
            w.failures = {HTTP_STATUS: w.requests}
            w.status = {404: w.requests}
            w.ok = 0
            return w, hist

        target.window = all_404  # type: ignore[method-assign]  # a stand-in: all 404s
        await _level(race, 20)  # a level of 404s only: its figures are the pane's
        p = pane(race, "uvicorn")
        qps = race.screen.query_one("#pane-uvicorn #qps", BigNumber)
        assert qps.value == "0" and qps.unit == "req/s ok"
        assert p.errors and qps.alert
        assert "HTTP 404" in race.text("#pane-uvicorn #failures")
        assert "HTTP 404" in race.text("#pane-uvicorn #annotation")
        assert race.text("#pane-uvicorn #breaking").startswith("▲ FAILING")


async def test_rate_mode_has_its_own_history_and_shows_behind_schedule():
    async for race in open_race(plan(stacks=("gunicorn-sync", "uvicorn"), concurrency=1)):
        await race.advance(12)
        await _level(race, 10)
        await _level(race, 100)
        await race.pilot.press("m")  # 100 req/s per stack
        await race.advance(16)
        levels = race.session.levels.results("gunicorn-sync")
        assert [s.level for s in levels] == [100]  # no closed-loop level relabelled
        # sync serves ~90 of the 100 req/s asked: behind schedule, said in words
        sync = race.text("#pane-gunicorn-sync #breaking")
        assert "behind schedule" in sync.lower() or sync.startswith("▲")
        shown = race.screen.last_view
        assert shown is not None
        view = next(p for p in shown.panes if p.id == "gunicorn-sync")
        assert view.behind.startswith("behind schedule: ") and "of 100 req/s" in view.behind
        assert "late" in view.behind
        uvi = next(p for p in shown.panes if p.id == "uvicorn")
        assert uvi.behind == "" and uvi.verdict is None  # keeps up: nothing to say


async def test_demo_is_labelled_synthetic_everywhere():
    async for race in open_race(plan(stacks=("uvicorn",))):
        await race.advance(8)
        assert race.screen.query_one("#banner").display
        assert "SYNTHETIC" in race.text("#banner")
        assert "SYNTHETIC" in race.text("#engine-health")
        assert "SYNTHETIC" in subtitle(pane(race, "uvicorn"))
        assert "SYNTHETIC" in race.app.title


@pytest.mark.parametrize("stack", ["gunicorn-sync", "gunicorn-gevent", "uvicorn", "uwsgi"])
@pytest.mark.parametrize("c", [1, 50, 500])
def test_demo_figures_obey_littles_law_and_a_cores_limit(stack, c):
    import asyncio

    from stackrace.engine.model import TargetSpec

    engine = SyntheticEngine()
    asyncio.run(engine.add_target(TargetSpec(id=stack, url="http://x", concurrency=c)))
    for _ in range(40):
        engine.step()
    assert engine.latest is not None
    t = engine.latest.target(stack)
    assert t is not None
    w = t.interval
    m = MODELS[stack]
    assert w.rps <= 1.03 * 1000 / m.cpu_ms  # one core: at most 1/cpu time per request
    assert w.rps <= 1.03 * m.workers * 1000 / m.service_ms
    refused = w.failures.get("refused", 0)
    if not refused:
        # a closed loop: every client has a request out; λW = C when all are answered
        assert w.waiting == c
        if not w.failures:
            assert w.rps * w.latency.mean / 1e6 == pytest.approx(c, rel=0.1)
    else:
        assert c > m.workers + m.backlog  # refusals only past workers + listen backlog


def test_demo_sync_queues_as_the_real_one_does():
    # gunicorn's listen backlog is 2048: 1000 clients queue, none is refused
    assert MODELS["gunicorn-sync"].backlog >= 1000


async def test_a_jit_pane_shows_its_warm_up_then_settles():
    # the synthetic PyPy serves a third as fast at first, all after 20 s of load
    async for race in open_race(plan(stacks=("gunicorn-pypy", "uvicorn"), concurrency=100)):
        await race.advance(30)  # started, loaded for ~6 s
        pypy = pane(race, "gunicorn-pypy")
        assert pypy.has_class("-warming") and subtitle(pypy).startswith("warming")
        note = race.text("#pane-gunicorn-pypy #annotation")
        assert note.startswith("warming up: req/s +"), note
        assert pane(race, "uvicorn").has_class("-ready")  # steady at once: settled
        first = list(pypy.rps_history)[1]
        await race.advance(100)  # 25 s more: full speed, steady
        assert pypy.has_class("-ready") and not pypy.has_class("-warming")
        assert list(pypy.rps_history)[-1] > 2 * first


async def test_a_talk_track_moves_the_load_and_captions_it():
    from stackrace.race.live.talk import parse_talk

    track = parse_talk(
        '[[step]]\nat = "0s"\nconcurrency = 1\nsay = "one client each"\n'
        '[[step]]\nafter = "3s"\nconcurrency = 50\nsay = "fifty clients"\n'
    )
    async for race in open_race(plan(stacks=("gunicorn-sync",), concurrency=10)):
        race.session.play_talk(track)
        await race.advance(2)
        assert race.session.concurrency == 1
        assert "one client each" in race.text("#status-line")
        await race.advance(14)
        assert race.session.concurrency == 50
        assert "fifty clients" in race.text("#status-line")
        assert race.screen.query_one("#level", LevelSlider).value == 50


async def test_a_talk_steps_concurrency_is_connections_after_a_rate_too():
    """`concurrency = 20` after `rate = 500` is a closed loop at 20 connections, never
    20 req/s: the word means connections wherever it is written."""
    from stackrace.race.live.talk import parse_talk

    track = parse_talk(
        '[[step]]\nat = "0s"\nrate = 500\n[[step]]\nafter = "3s"\nconcurrency = 20\n'
    )
    async for race in open_race(plan(stacks=("gunicorn-sync",), concurrency=10)):
        race.session.play_talk(track)
        await race.advance(2)
        assert race.session.rate == 500.0
        await race.advance(14)
        assert race.session.rate is None and race.session.concurrency == 20
        assert race.screen.query_one("#level", LevelSlider).value == 20
