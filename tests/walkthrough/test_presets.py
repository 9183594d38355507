"""Every preset, opened with `--preset NAME --go` as the README says: every stack starts,
is loaded and answers in the app, a seed preset shows its experiment beside the panes,
and quitting leaves nothing running. Three presets take a second path on the way (each
path once is cheaper than a race of its own): seed-002-concurrency-ceilings's four
stacks in projector mode on a 100×30 terminal, sync-ceiling recorded, then replayed, and
slow-clients naming the sync worker its slow clients hold (and not the proxied one).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from stackrace.race.core.presets import PRESETS_DIR, load_preset
from stackrace.race.live.replay import ReplayPlayer
from stackrace.race.live.summary import to_dict
from stackrace.race.live.view import SessionView
from stackrace.race.playback.recording import load_recording
from stackrace.stacks.protocols import NEEDS_ENGINE, engine_speaks_h2
from stackrace.tui.app import StackraceApp
from stackrace.tui.bignum import BigNumber
from stackrace.tui.race import RaceScreen
from stackrace.tui.slider import LevelSlider
from stackrace.tui.thennow import ThenNowStrip
from tests.walkthrough.realapp import (
    all_loaded,
    panes_shown,
    race_of,
    real_app,
    wait_for,
    why_not,
)

H2 = "h1-vs-h2"  # h2 stacks: raced once the engine speaks HTTP/2 (issue 51)
PRESETS = [
    pytest.param(
        name,
        marks=pytest.mark.skipif(not engine_speaks_h2(), reason=NEEDS_ENGINE) if name == H2 else (),
    )
    for name in sorted(p.stem for p in PRESETS_DIR.glob("*.toml"))
]
PROJECTOR = "seed-002-concurrency-ceilings"  # four stacks: 2×2 at 100×30
RECORDED = "sync-ceiling"
HELD = "slow-clients"


@pytest.mark.parametrize("name", PRESETS)
async def test_every_preset_opens_and_races(name: str, tmp_path: Path):
    preset = load_preset(name)
    argv = ["--preset", name, "--go"]
    size = (160, 48)
    if name == PROJECTOR:
        argv.append("--big")
        size = (100, 30)
    record = tmp_path / "race.jsonl.gz"
    if name == RECORDED:
        argv += ["--record", str(record)]
    async with real_app(argv, size=size, screenshots=tmp_path) as (app, pilot):
        view = await wait_for(app, pilot, all_loaded, timeout=60)
        last = app.race.last_view if app.race is not None else None
        assert view is not None, f"{name}: not every stack raced: {why_not(last)}"
        assert len(view.panes) == len(preset.stacks)
        # each variant in a pane of its own: ids are slugs, names the stacks' own
        assert {p.id for p in view.panes} == set(preset.stacks)
        race = app.race
        assert race is not None
        strip = race.query_one("#thennow", ThenNowStrip)
        if preset.experiment is not None and not race.projector:
            assert strip.display, "a seed preset shows its experiment beside the panes"
            assert f"experiment {preset.experiment}" in str(strip.content)
        elif preset.experiment is None:
            assert not strip.display
        if name == PROJECTOR:
            await pilot.pause(1.0)
            check_projector(race)
        if name == RECORDED:
            live = await record_a_little(app, pilot)
        if name == HELD:
            await check_held(app, pilot)
        if name == H2:
            await check_h2(app, pilot)
    if name == RECORDED:
        await check_replay(record, live)


async def check_h2(app: StackraceApp, pilot: Pilot[int]) -> None:
    """h1-vs-h2, with the engine's own figures: it opens at its level (100 in flight),
    the status line says how they are split, each h1 pane says "h1" and each h2c pane
    heads with its 4×25 and the streams open and GOAWAYs its window counted (the head's
    figures are the engine's: h2 streams in flight, never more than the level), and
    the experiment's claims are judged at 100, none left "cannot be tested"."""
    race = race_of(app)
    view = race.last_view
    assert view is not None and view.concurrency == 100, "a one-level preset opens there"
    assert view.load_split == "h1: 100 connections · h2: 4 connections x 25 streams"
    assert view.load_split in str(race.query_one("#status-line", Static).content)
    for p in view.panes:
        head = str(p.protocol)
        shown = str(race.panes[p.id].query_one("#head", Static).content)
        assert p.target is not None
        total = p.target.total
        if ":http=h2c" not in p.id:
            assert head == "h1" and total.http == "1.1" and total.streams_open == 0, p.id
            assert " · h1" in shown, shown
            continue
        assert total.http == "2" and total.requests > 0, (p.id, total.http)
        assert 0 < total.streams_open <= 100, (p.id, total.streams_open)
        said = f"h2c 4×25 · {total.streams_open:,} streams · {total.goaways:,} GOAWAY"
        assert head.startswith(said), (head, said)
        # a quarter of 160 columns: the GOAWAYs kept, the streams left to the waiting line
        # (drawn from this view or the one before: the level's count only grows)
        goaways = re.search(r" · ([\d,]+) GOAWAY", shown)
        assert shown.startswith("h2c 4×25 · ") and goaways is not None, shown
        assert int(goaways.group(1).replace(",", "")) <= total.goaways, (shown, total.goaways)
    strip = race.query_one("#thennow", ThenNowStrip)

    def judged(_view: SessionView) -> bool:
        said = str(strip.content)
        return "claims:" in said and "cannot be tested" not in said and "not yet" not in said

    assert await wait_for(app, pilot, judged, timeout=30), str(strip.content)
    said = str(strip.content)
    assert said.count("✓") + said.count("✗") == 3, said


def check_projector(race: RaceScreen) -> None:
    """Projector mode at 100×30: 2×2, each pane's verdict line, its name (a bold line: the
    verdict takes the row the large name had), one digit size and one p99 unit in every
    pane."""
    assert race.projector and race.query_one("#panes").styles.grid_size_columns == 2
    sizes, units = set(), set()
    for pane in race.panes.values():
        name = pane.query_one("#name-big", BigNumber)
        assert name.display and name.region.height >= 1, pane.pane_id
        assert pane.query_one("#breaking").display, pane.pane_id
        qps = pane.query_one("#qps", BigNumber)
        p99 = pane.query_one("#p99big", BigNumber)
        assert qps.display and p99.display and p99.region.height == qps.region.height
        sizes.add(qps.region.height)
        units.add(p99.value.split()[-1])
    assert len(sizes) == 1 and len(units) == 1, (sizes, units)
    assert len({p.label for p in race.panes.values()}) == len(race.panes)


async def check_held(app: StackraceApp, pilot: Pilot[int]) -> None:
    """`--preset slow-clients --go` as a person opens it: at its first level the lone
    gunicorn sync worker's pane says slow clients hold it, and the same worker behind
    nginx does not — the sentence is the preset's point (issue 26)."""

    def held(v: SessionView) -> bool:
        return "slow clients hold the worker" in v.panes[0].annotation

    view = await wait_for(app, pilot, held, timeout=25)
    assert view is not None, [(p.id, p.annotation) for p in panes_shown(app)]
    sync, proxied, uvicorn = view.panes
    assert sync.id == "gunicorn-sync" and uvicorn.id == "uvicorn"
    assert "slow clients hold" not in proxied.annotation
    assert "slow clients hold" not in uvicorn.annotation


async def record_a_little(app: StackraceApp, pilot: Pilot[int]) -> dict[str, object]:
    """A slider move and `b` while recording; the summary of what was measured."""
    slider = race_of(app).query_one("#level", LevelSlider)
    slider.focus()
    await pilot.pause(2.0)
    await pilot.press("left")  # c=10 → c=5
    await pilot.pause(2.0)
    await pilot.press("b")
    await pilot.pause(0.5)
    return to_dict(app.session.summary(), False, title="t")


async def check_replay(record: Path, live: dict[str, object]) -> None:
    """`stackrace replay`: the level finished while recording figure for figure (the
    one running went on a little past the live summary's moment), memory before load
    as measured, projector mode as switched on."""
    player = ReplayPlayer(load_recording(record))
    replay = StackraceApp(
        player.session, player.plan, [], show_picker=False, tick_interval=None, player=player
    )
    async with replay.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert replay.race is not None
        while not player.ended:
            await player.advance(0.5)
            await replay.race.tick()
        await pilot.pause()
        replayed = to_dict(player.session.summary(), False, title="t")
        live_stacks, replayed_stacks = live["stacks"], replayed["stacks"]
        assert isinstance(live_stacks, list) and isinstance(replayed_stacks, list)
        for a, b in zip(live_stacks, replayed_stacks, strict=True):
            assert a["rss_before"] == b["rss_before"] and a["rss_before"]
            done_a = [lv for lv in a["levels"] if lv["level"] == 10]
            done_b = [lv for lv in b["levels"] if lv["level"] == 10]
            assert done_a and done_a == done_b, (a["name"], done_a, done_b)
        assert replay.race.projector  # `b` was recorded
        await pilot.press("q")
