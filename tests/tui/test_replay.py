"""Record a race, play it back in the same app with no servers and no engine (pause,
speed, seek), and overlay a recording or a saved bench run as a ghost."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from textual.widgets import Static

from stackrace.race.live.replay import ReplayPlayer
from stackrace.race.live.session_recorder import Recorder
from stackrace.race.live.view import SummaryRow
from stackrace.race.playback.ghost import load_ghost
from stackrace.race.playback.recording import (
    Command,
    Hist,
    Tick,
    load_recording,
)
from stackrace.tui.app import StackraceApp
from stackrace.tui.bignum import BigNumber
from stackrace.tui.ghost import GhostPane
from stackrace.tui.slider import LevelSlider
from tests.tui.conftest import SIZE, open_race, plan, recording_engine, synthetic_session


def bench_run_file(path: Path) -> Path:
    """A saved `stackrace bench --json` run (schema v2): gunicorn sync at c=1..500."""
    from stackrace.engine.model import LatencySummary, WindowStats
    from stackrace.report.schema import (
        SCHEMA_VERSION,
        BenchRun,
        Level,
        Machine,
        Memory,
        Settings,
        StackResult,
        dumps,
    )

    levels = [
        Level(
            concurrency=c,
            rate=None,
            window=WindowStats(
                seconds=5.0,
                requests=450,
                ok=450,
                rps=90.0,
                latency=LatencySummary(count=450, mean=c * 11_000, p50=c * 11_000, p99=c * 12_000),
            ),
            memory_before=Memory(43 << 20, 40 << 20),
            memory_after=Memory(44 << 20, 41 << 20),
            cpu_percent=8.0,
            engine_cpu=3.0,
            engine_saturated=False,
            hdr="",
        )
        for c in (1, 10, 100, 200, 500)
    ]
    run = BenchRun(
        schema=SCHEMA_VERSION,
        started="2024-05-01T10:00:00Z",
        machine=Machine("h", "cpu", 2, 1 << 30, "k", "os", "3.11", "0.1"),
        settings=Settings(workload="io"),
        stacks=[StackResult("gunicorn-sync", "gunicorn sync", "sync", "23", levels)],
    )
    path.write_bytes(dumps(run))
    return path


async def record_race(path: Path) -> dict[str, str]:
    """A synthetic race at c=10 then c=200 (a slider move), recorded; the figures shown."""
    session = synthetic_session()
    session.listeners.append(Recorder(path, clock=recording_engine(session).clock))
    async for race in open_race(plan(stacks=("gunicorn-sync", "uvicorn")), session, settle=16):
        pilot = race.pilot
        slider = race.screen.query_one("#level", LevelSlider)
        slider.focus()
        await pilot.press("right", "right", "right")  # 10 -> 20 -> 50 -> 100
        await pilot.press("right")  # -> 200
        await race.advance(20)
        shown = {
            pid: race.screen.query_one(f"#pane-{pid} #qps", BigNumber).value
            for pid in ("gunicorn-sync", "uvicorn")
        }
        shown["sync-latency"] = race.text("#pane-gunicorn-sync #latency")
        await pilot.press("q")
        await pilot.pause()
    return shown


async def test_record_then_replay_shows_the_same_race(tmp_path):
    path = tmp_path / "race.jsonl.gz"
    live = await record_race(path)
    rec = load_recording(path)
    assert [m.id for m in rec.members] == ["gunicorn-sync", "uvicorn"]
    assert rec.header.synthetic and rec.header.settings.workload == "io"
    ticks = [r for r in rec.records if isinstance(r, Tick)]
    assert len(ticks) >= 35 and ticks[-1].snap is not None
    assert [c.value for c in rec.records if isinstance(c, Command) and c.what == "concurrency"][
        -1
    ] == 200
    assert any(isinstance(r, Hist) and r.pairs for r in rec.records)

    player = ReplayPlayer(rec)
    app = StackraceApp(
        player.session, player.plan, [], show_picker=False, tick_interval=None, player=player
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.race
        assert screen is not None
        await player.seek(rec.duration - 1.0)
        for _ in range(4):
            await player.advance(0.25)
            await screen.tick()
        await pilot.pause()
        # the same figures, from the file: no engine, no servers
        for pid in ("gunicorn-sync", "uvicorn"):
            replayed = float(
                screen.query_one(f"#pane-{pid} #qps", BigNumber).value.replace(",", "")
            )
            assert abs(replayed - float(live[pid].replace(",", ""))) <= 0.05 * replayed
        assert (
            str(screen.query_one("#pane-gunicorn-sync #latency", Static).content)
            == live["sync-latency"]
        )
        assert screen.query_one("#level", LevelSlider).value == 200
        assert "REPLAY race.jsonl.gz" in str(screen.query_one("#status-line", Static).content)
        # the latency chart reads the recorded histograms
        assert player.session.percentile_curve("uvicorn", [50.0, 99.0])
        # seek back: the session is rebuilt from the start
        await player.seek(2.0)
        await screen.tick()
        assert screen.query_one("#level", LevelSlider).value == 10
        # pause and speed
        await pilot.press("space")
        assert player.paused
        await player.advance(5.0)
        assert player.position == 2.0
        await pilot.press("space", "greater_than_sign", "greater_than_sign")
        assert player.speed == 4.0 and not player.paused
        await player.advance(1.0)
        assert player.position == 6.0
        # played four times as fast, the panes still show figures (each tick crosses
        # several engine intervals)
        before = screen.query_one("#pane-uvicorn #qps", BigNumber).value
        for _ in range(3):
            await player.advance(0.25)
            await screen.tick()
        shown = screen.query_one("#pane-uvicorn #qps", BigNumber).value
        assert shown not in ("0", before) and float(shown.replace(",", "")) > 100
        await pilot.press("left_square_bracket")
        assert player.position == 0.0
        await pilot.press("right_square_bracket")
        assert player.position == min(10.0, rec.duration)
        # the load is the recording's: the slider, m and r do not change it
        before = (player.session.concurrency, player.session.rate)
        slider = screen.query_one("#level", LevelSlider)
        slider.focus()
        await pilot.press("right", "m", "r")
        await pilot.pause()
        assert (player.session.concurrency, player.session.rate) == before
        assert player.session.ramp is None
        await pilot.press("q")


async def test_a_recording_cut_short_still_plays(tmp_path):
    path = tmp_path / "race.jsonl"
    await record_race(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])  # killed mid-line
    rec = load_recording(path)
    assert rec.duration > 0 and rec.members


async def test_ghosts_from_a_recording_and_a_bench_run_beside_live_panes(tmp_path):
    path = tmp_path / "last-week.jsonl.gz"
    await record_race(path)
    ghost = load_ghost(path)
    views = {v.name: v for v in ghost.view(200, False)}
    assert views["uvicorn"].at is not None and views["uvicorn"].at.level == 200
    assert views["uvicorn"].at.rps > 1000
    bench = load_ghost(bench_run_file(tmp_path / "run.json"))
    assert bench.label == "bench 2024-05-01"
    sync = next(v for v in bench.view(100, False) if v.id.endswith("gunicorn-sync"))
    assert sync.at is not None and sync.at.level == 100 and sync.at.rps == 90.0
    nearest = next(v for v in bench.view(300, False) if v.id.endswith("gunicorn-sync")).at
    assert nearest is not None and nearest.level in (200, 500)
    # in the app: one dashed pane per ghost stack, beside its live twin, at the live
    # level, labelled with what it is and its date, and its file
    session = synthetic_session()
    session.ghosts.append(bench)
    two = plan(stacks=("gunicorn-sync", "uvicorn"), concurrency=100)
    async for race in open_race(two, session, settle=8):
        ghosts = list(race.screen.query(GhostPane))
        assert len(ghosts) == 1
        head = race.screen.query_one(f"#{ghosts[0].id} .ghost-head", Static)
        assert "bench 2024-05-01, at c=100" in str(head.content)
        assert ghosts[0].border_subtitle == "run.json"
        panes = [p.id for p in race.screen.query("#panes > *")]
        assert panes == ["pane-gunicorn-sync", ghosts[0].id, "pane-uvicorn"]


def _figures(rows: Sequence[SummaryRow]) -> dict[str, object]:
    """A summary's figures, as its files carry them (no time stamp)."""
    from stackrace.race.live.summary import to_dict

    data = to_dict(rows, False, title="t")
    data.pop("created")
    return data


async def test_replay_shows_what_the_room_saw_summary_view_keys_and_footer(tmp_path):
    """A ramp run and its summary opened, projector mode switched on, the chart hidden:
    the replay's summary equals the live one figure for figure, the view changes come
    back at their moment, and the footer offers the replay's keys, not the load's."""
    path = tmp_path / "talk.jsonl.gz"
    session = synthetic_session()
    session.listeners.append(Recorder(path, clock=recording_engine(session).clock))
    four = plan(stacks=("gunicorn-sync", "gunicorn-gevent", "uvicorn", "aiohttp"))
    async for race in open_race(four, session, settle=8):
        session.start_ramp(top=100, dwell=2.0)
        for _ in range(80):
            await race.advance()
            if session.ramp_finished:
                break
        await race.advance(2)
        assert session.ramp_finished
        live = _figures(session.summary())
        stacks = live["stacks"]  # sync broke: something to compare
        assert isinstance(stacks, list) and stacks[0]["breaking"] is not None
        await race.pilot.press("escape")  # the summary opened by itself; close it
        await race.pilot.press("b")  # projector mode
        await race.advance(4)
        await race.pilot.press("q")
        await race.pilot.pause()
    rec = load_recording(path)
    player = ReplayPlayer(rec)
    app = StackraceApp(
        player.session, player.plan, [], show_picker=False, tick_interval=None, player=player
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.race
        assert screen is not None
        # the footer: the replay's keys, not the load's
        keys = {b.binding.key for b in screen.active_bindings.values() if b.enabled}
        shown = [b.binding.key for b in screen.active_bindings.values() if b.binding.show]
        assert "space" in keys and "right_square_bracket" in shown
        assert not screen.check_action("level", (1,)) and not screen.check_action("ramp", ())
        while not player.ended:
            await player.advance(0.5)
            await screen.tick()
        await pilot.pause()
        assert _figures(player.session.summary()) == live
        assert player.session.ramp_end == session.ramp_end
        # the summary was opened and closed, then projector mode came on, as live
        assert screen.projector and not isinstance(app.screen, type(None))
        assert all(p.has_class("-projector") for p in screen.panes.values())
        # the memory before load is the one live measured
        rows = {r.id: r for r in player.session.summary()}
        assert all(r.mem_before is not None for r in rows.values())


async def test_replay_html_writes_the_recorded_race_as_a_page(tmp_path):
    """`replay FILE --html OUT`: the whole recording played with no app, its page
    written: both stacks over time, their latency from the recorded histograms."""
    import asyncio
    import dataclasses
    import re

    from stackrace.commands import replay

    path = tmp_path / "race.jsonl.gz"
    await record_race(path)
    out = tmp_path / "race.html"
    args = replay.ReplayOptions(str(path), speed=1.0, paused=False, big=False, html_out=str(out))
    assert await asyncio.to_thread(replay.run, args) == 0
    text = out.read_text()
    for stack in ("gunicorn sync", "uvicorn"):  # as the app names them
        assert f'<figure data-stack="{stack}"' in text
    # the p99 over time, a line per stack, from the histograms' differences
    assert len(re.findall(r'data-name="p99" d="M[0-9.]+,[0-9.]+l', text)) == 2
    assert ">c=200</text>" in text and "not recorded (a replay)" in text
    # the page's run is the summary's: each stack's judged levels, and its series
    from stackrace.race.live.page import session_run, unknown_machine
    from stackrace.race.live.summary import context
    from stackrace.race.playback.series import recording_series

    rec = load_recording(path)
    player = ReplayPlayer(rec)
    await player.start()
    await player.seek(player.duration)
    rows = player.session.summary()
    run = session_run(
        player.session, rows, context(player.session), recording_series(rec), unknown_machine("x")
    )
    assert [len(st.levels) for st in run.stacks] == [len(r.steps) for r in rows]
    assert [lv.level for lv in run.stacks[0].levels] == [s.level for s in rows[0].steps]
    assert all(st.series is not None and st.series.p99 for st in run.stacks)
    missing = tmp_path / "no" / "x.html"
    args = dataclasses.replace(args, html_out=str(missing))
    assert await asyncio.to_thread(replay.run, args) == 2 and not missing.exists()
