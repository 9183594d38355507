"""Every screen one story (issue 48), in the app on the synthetic stream: a wedged
pane's big figure is what it serves now, a pane's sentence keeps its figures whole in
a narrow pane, and a replay shows no load keys and keeps a preset's then-beside-now
strip. The text functions: tests/unit/test_one_story.py; `k` asking for an SLO:
tests/tui/test_capacity_ranking.py; the web view closed at any moment:
tests/e2e/test_web.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import msgspec
from textual.widgets import Static

from stackrace.race.live.replay import ReplayPlayer
from stackrace.race.live.session_recorder import Recorder
from stackrace.race.playback.recording import load_recording
from stackrace.rules.level import WEDGED, Judgment
from stackrace.tui.app import StackraceApp
from stackrace.tui.bignum import BigNumber
from stackrace.tui.pane import QPS_EVERY, StackPane, pane_widget_id
from stackrace.tui.slider import LevelSlider
from stackrace.tui.thennow import ThenNowStrip
from tests.tui.conftest import SIZE, open_race, plan, recording_engine, synthetic_session

TIMEOUTS = (
    "1,200 timed out after 10 s: its accept queue is not full (1,371 of 4,096): "
    "the server took them and did not answer in time"
)


async def test_a_wedged_pane_shows_what_it_serves_now_not_the_levels_average():
    """A wedged sync pane showed big digits of 24, 10, 7 req/s (the level's average)
    under "▲ WEDGED … no answer for 34 s": its big figure is now's, 0."""
    async for race in open_race(plan(stacks=("gunicorn-sync",)), settle=16):
        view = race.screen.last_view
        assert view is not None
        pv = view.panes[0]
        t = pv.target
        assert t is not None and t.total.goodput > 1  # the level served before
        # then nothing comes back: the last interval answered none, clients wait
        stuck = msgspec.structs.replace(t.interval, requests=0, ok=0, waiting=10)
        wedged = Judgment(
            level=t.level, state=WEDGED, why="no answer for 34 s while 10 wait",
            goodput=t.total.goodput, p99_us=t.total.latency.p99, failed=0,
        )  # fmt: skip
        now = replace(pv, target=msgspec.structs.replace(t, interval=stuck), judgment=wedged)
        pane = race.screen.query_one(f"#{pane_widget_id(pv.id)}", StackPane)
        pane.show(now, True, False, 10.0, seq=view.seq + QPS_EVERY)
        await race.pilot.pause()
        assert pane.query_one("#qps", BigNumber).value == "0"
        assert "WEDGED" in str(pane.query_one("#breaking", Static).content)
        # a pane that is not wedged keeps the level's figure (one story: its window)
        pane.show(replace(now, judgment=None), True, False, 10.0, seq=view.seq + 2 * QPS_EVERY)
        await race.pilot.pause()
        assert pane.query_one("#qps", BigNumber).value != "0"


async def test_a_narrow_panes_sentence_keeps_its_figures_whole():
    """Four panes at 100 columns: the sentence under a verdict was cut at the width,
    "its accept queue is not full (1,371"; now its words are shortened and a figure is
    shown whole or not at all."""
    async for race in open_race(plan(), size=(100, 40), settle=8):
        view = race.screen.last_view
        assert view is not None
        pv = view.panes[0]
        pane = race.screen.query_one(f"#{pane_widget_id(pv.id)}", StackPane)
        width = pane.content_size.width
        assert 0 < width < len(TIMEOUTS) // 2  # the sentence cannot fit as it is
        pane.show(replace(pv, annotation=TIMEOUTS), True, False, 10.0, seq=view.seq + QPS_EVERY)
        await race.pilot.pause()
        said = str(pane.query_one("#annotation", Static).content)
        assert said and said != TIMEOUTS
        assert "(1,371" not in said or "(1,371 of 4,096)" in said, said
        assert said.count("(") == said.count(")"), said
        assert said.startswith("1,200 timed out"), said


async def test_a_wide_pane_shows_every_figure_a_narrow_one_whole_ones():
    """The waiting line, memory and failures: every figure in a wide pane; in a narrow
    one each figure shown is whole, and those left out are said with "…"."""
    async for race in open_race(plan(stacks=("uvicorn",)), settle=8):
        pane = race.screen.query_one(f"#{pane_widget_id('uvicorn')}", StackPane)
        assert "timeout 10s" in pane.line("waiting")
        assert "before" in pane.line("memory")
    async for race in open_race(plan(), size=(100, 40), settle=8):
        await race.advance(QPS_EVERY)  # a redraw once the panes have their width
        for pane in race.screen.query(StackPane):
            width = pane.content_size.width
            for name in ("waiting", "memory", "failures"):
                said = pane.line(name)
                assert len(said) <= width, (name, said, width)
                assert not said.endswith("timeout …") and "timeout 1…" not in said, said


async def _record_a_preset_race(path: Path) -> None:
    from stackrace.race.core.presets import load_preset

    preset = load_preset("seed-002-concurrency-ceilings")
    session = synthetic_session()
    session.then = preset.then()
    session.listeners.append(Recorder(path, clock=recording_engine(session).clock))
    p = plan(stacks=tuple(preset.stacks), concurrency=10, workload="hello")
    async for race in open_race(p, session, settle=12):
        assert race.screen.query_one("#thennow", ThenNowStrip).display
        await race.pilot.press("q")
        await race.pilot.pause()


def _footer_keys(app: StackraceApp) -> set[str]:
    """The descriptions of the keys the footer shows now (check_action's False hides)."""
    return {
        ab.binding.description
        for ab in app.active_bindings.values()
        if ab.binding.show and ab.enabled
    }


async def test_a_replay_hides_the_load_keys_and_keeps_the_presets_strip(tmp_path):
    path = tmp_path / "preset.jsonl.gz"
    await _record_a_preset_race(path)
    rec = load_recording(path)
    assert rec.header.then is not None  # the experiment travels with the recording
    player = ReplayPlayer(rec)
    app = StackraceApp(
        player.session, player.plan, [], show_picker=False, tick_interval=None, player=player
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.race
        assert screen is not None
        await player.seek(rec.duration)
        for _ in range(4):
            await player.advance(0.25)
            await screen.tick()
        screen._show_then_now()
        await pilot.pause()
        strip = screen.query_one("#thennow", ThenNowStrip)
        assert strip.display
        assert str(strip.content).startswith("Then beside now: experiment 002")
        # the slider focused (its own keys come first in the footer): no "+ more load"
        slider = screen.query_one("#level", LevelSlider)
        slider.focus()
        await pilot.pause()
        keys = _footer_keys(app)
        assert "more load" not in keys and "less" not in keys, keys
        assert {"pause", "faster", "slower"} <= keys, keys
        level = slider.value
        await pilot.press("plus", "right")  # a key of the load does nothing in a replay
        await pilot.pause()
        assert slider.value == level
