"""The race screen over a synthetic, deterministic stats stream."""

from __future__ import annotations

from textual.widgets import DataTable

from stackrace.race.live.demo import DemoSource
from stackrace.tui.bignum import BigNumber
from stackrace.tui.chart import PercentileChart
from stackrace.tui.dialogs import LogScreen, SummaryScreen
from stackrace.tui.levelchart import LevelChart
from stackrace.tui.pane import StackPane
from stackrace.tui.slider import LevelSlider
from stackrace.tui.thennow import ThenNowStrip
from tests.tui.conftest import Race, open_race, plan, subtitle


async def test_one_pane_per_stack_side_by_side(race: Race):
    await race.advance(8)
    panes = list(race.screen.query(StackPane))
    assert [p.border_title for p in panes] == [
        "gunicorn sync",
        "gunicorn gevent",
        "uvicorn",
        "aiohttp",
    ]
    # side by side: one row, left to right
    assert len({p.region.y for p in panes}) == 1
    assert [p.region.x for p in panes] == sorted(p.region.x for p in panes)


async def test_pane_shows_qps_latency_failures_memory_cpu(race: Race):
    await race.advance(8)
    pane = "#pane-uvicorn"
    assert race.screen.query_one(f"{pane} #qps", BigNumber).value.replace(",", "").isdigit()
    latency = race.text(f"{pane} #latency")
    for label in ("p50", "p90", "p99", "p99.9", "max"):
        assert label in latency
    assert "ms" in latency
    p = race.screen.query_one(pane, StackPane)
    assert p.line("failures") == "failed none"
    assert p.line("waiting").startswith("waiting 10 ")
    # a figure whole in the pane's width, or left out and said to be (never "timeout 1…")
    width = p.content_size.width
    waiting = p.line("waiting")
    assert "timeout 10s" in waiting or waiting.endswith(" …"), waiting
    memory = p.line("memory")
    assert "RSS" in memory and "USS" in memory and "MiB" in memory
    assert "before" in memory or memory.endswith(" …"), memory
    assert len(waiting) <= width and len(memory) <= width
    assert p.line("cpu").startswith("CPU ") and "%" in p.line("cpu")
    # both lines of each pair are on screen
    assert race.text(f"{pane} #failures").split("\n") == [p.line("failures"), p.line("waiting")]
    assert race.text(f"{pane} #memory").split("\n") == [p.line("memory"), p.line("cpu")]
    # the synthetic engine says so on every pane
    assert subtitle(race.screen.query_one(pane, StackPane)).endswith("· SYNTHETIC")
    assert len(race.screen.query_one(pane, StackPane).rps_history) >= 1  # one point a second


async def test_starting_stack_is_shown_as_starting():
    async for race in open_race(plan(stacks=("aiohttp",))):
        pane = race.screen.query_one("#pane-aiohttp", StackPane)
        assert subtitle(pane).startswith("starting…")
        assert pane.has_class("-starting")
        await race.advance(40)
        assert subtitle(pane).startswith("ready")


async def test_slider_changes_load_on_every_stack_at_once(race: Race):
    await race.advance(8)
    slider = race.screen.query_one("#level", LevelSlider)
    slider.focus()
    await race.pilot.press("right", "right")  # 10 -> 20 -> 50
    await race.pilot.pause()
    assert ("concurrency", 50) in race.engine.commands
    assert ("add", "uvicorn") in race.engine.commands  # nothing restarted: no remove
    assert not [c for c in race.engine.commands if c[0] == "remove"]
    await race.advance(1)
    for pane_id in ("gunicorn-sync", "uvicorn"):
        assert "c=50" in race.text(f"#pane-{pane_id} #head")


async def test_slider_by_mouse_drives_the_engine(race: Race):
    await race.advance(6)
    slider = race.screen.query_one("#level", LevelSlider)
    col = slider._column_of(slider.steps.index(1000))
    await race.pilot.click("#level", offset=(col, 0))
    await race.pilot.pause()
    assert slider.value == 1000
    assert race.engine.commands[-1] == ("concurrency", 1000)


async def test_failures_are_highlighted_when_they_rise():
    # uWSGI's listen queue holds 100: past it, connections are refused
    async for race in open_race(plan(stacks=("uwsgi", "uvicorn"))):
        await race.advance(8)
        await race.session.set_level(500)
        await race.advance(2)
        uwsgi = race.screen.query_one("#pane-uwsgi", StackPane)
        assert uwsgi.rising
        assert "refused" in race.text("#pane-uwsgi #failures")
        assert "(+" in race.text("#pane-uwsgi #failures")
        assert "refused" in race.text("#pane-uwsgi #annotation")
        assert not race.screen.query_one("#pane-uvicorn", StackPane).rising


async def test_breaking_point_is_marked_on_the_sync_stack_only(race: Race):
    await race.advance(12)  # c=10 long enough to count
    # c=100: one sync worker of 11 ms makes each client wait ~1.1 s; the others wait
    # about twice what one takes (gevent's CPU, 0.25 ms a request, is 100 % at 4,000)
    await race.session.set_level(100)
    await race.advance(12)
    sync = race.screen.query_one("#pane-gunicorn-sync", StackPane)
    assert sync.has_class("-broken")
    assert race.text("#pane-gunicorn-sync #breaking").startswith("▲ ")
    for other in ("gunicorn-gevent", "uvicorn", "aiohttp"):
        assert not race.screen.query_one(f"#pane-{other}", StackPane).has_class("-broken")


async def test_crashed_stack_shows_its_log_tail():
    async for race in open_race(plan(stacks=("uvicorn", "bjoern"))):
        await race.advance(45)  # the synthetic bjoern crashes after 40 steps
        pane = race.screen.query_one("#pane-bjoern", StackPane)
        assert subtitle(pane).startswith("CRASHED")
        assert pane.has_class("-crashed")
        assert "MemoryError" in race.text("#pane-bjoern #log")
        assert ("remove", "bjoern") in race.engine.commands
        assert race.screen.query_one("#pane-uvicorn", StackPane).has_class("-ready")


async def test_ramp_marks_breaking_points_and_fills_the_summary(race: Race, tmp_path):
    await race.advance(6)
    await race.pilot.press("r")
    await race.advance(4)
    assert "ramp" in race.text("#status-line")
    await race.advance(160)  # dwell 3 s = 12 steps per level
    assert race.session.ramp is None  # done, level restored
    assert race.screen.query_one("#level", LevelSlider).value == 10
    # a ramp never ends silently: its summary opens by itself, titled as the ramp's
    summary = race.app.screen
    assert isinstance(summary, SummaryScreen)
    assert summary.from_ramp and "Ramp result" in summary.title_text
    assert "press r" not in summary.title_text
    table = summary.query_one("#summary", DataTable)
    assert table.row_count == 4
    sync = table.get_row("gunicorn-sync")
    assert str(sync[3]).startswith("c=") and str(sync[4])  # breaking point and why
    uvi = table.get_row("uvicorn")
    # uvicorn is CPU-bound on its one core somewhere past 50 clients; sync broke far earlier
    sync_at = int(str(sync[3]).removeprefix("c=").replace(",", ""))
    if str(uvi[3]) != "not reached":
        assert int(str(uvi[3]).removeprefix("c=").replace(",", "")) > sync_at
    rps = lambda cell: float(str(cell).removesuffix(" req/s").replace(",", ""))  # noqa: E731
    assert rps(uvi[1]) > rps(sync[1])
    # the combined chart: every stack's levels, req/s and p99
    # every level of every stack named with its state, those after a break too (a
    # 4-stack ramp's summary never said what happened at its top level)
    about = str(summary.query_one("#summary-about").render())
    top = max(s.level for r in summary.rows for s in r.steps)
    for row in summary.rows:
        line = next(x for x in about.splitlines() if x.startswith(f"{row.name}: "))
        assert f"{top:,} " in line, line  # the top level, on its own or ending a run
        assert line.split(": ", 1)[1].startswith("c=1"), line  # from the first
    chart = summary.query_one("#level-chart", LevelChart)
    assert len(chart.series) == 4
    assert "req/s" in str(chart.render()) and "p99" in str(chart.render())
    # a directory that cannot be made: one notification naming it, the app goes on
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    race.app.screenshot_dir = blocked / "summaries"
    await race.pilot.press("e")
    await race.pilot.pause()
    assert summary.exported is None and race.app.screen is summary
    said = [n.message for n in race.app._notifications]
    assert any(m.startswith(f"summary not saved: {blocked / 'summaries'}") for m in said), said
    # e writes the summary as Markdown and JSON (where screenshots go)
    race.app.screenshot_dir = tmp_path
    await race.pilot.press("e")
    await race.pilot.pause()
    md = list(tmp_path.glob("stackrace-summary-*.md"))
    js = list(tmp_path.glob("stackrace-summary-*.json"))
    assert len(md) == len(js) == 1
    assert "gunicorn sync" in md[0].read_text() and '"kind": "queueing"' in js[0].read_text()
    assert "- gunicorn sync, every level: c=1" in md[0].read_text()
    # and the race as one offline page: every stack over time, the ramp's verdicts
    (page,) = tmp_path.glob("stackrace-summary-*.html")
    text = page.read_text()
    assert text.count('<figure data-stack="gunicorn sync"') >= 5, text[:2000]
    assert "broke: queueing" in text and "Ramp result" in text
    await race.pilot.press("escape")


async def test_rate_mode_shows_corrected_and_uncorrected_latency(race: Race):
    await race.advance(8)
    await race.pilot.press("m")
    await race.advance(2)
    assert ("rate", 10.0) in race.engine.commands
    latency = race.text("#pane-uvicorn #latency")
    assert "co" in latency and "raw" in latency
    assert "req/s" in race.text("#mode-label")


async def test_log_screen_for_the_focused_stack(race: Race):
    await race.advance(6)
    race.screen.query_one("#pane-uvicorn", StackPane).focus()
    await race.pilot.pause()
    await race.pilot.press("l")
    await race.pilot.pause()
    assert isinstance(race.app.screen, LogScreen)
    assert race.app.screen.title_text == "uvicorn"
    await race.pilot.press("escape")
    await race.pilot.pause()
    assert race.app.screen is race.screen


async def test_chart_follows_focus_and_shows_all_on_request(race: Race):
    await race.advance(8)
    race.screen.query_one("#pane-aiohttp", StackPane).focus()
    chart = race.screen.query_one("#chart", PercentileChart)
    for _ in range(20):  # the focus event comes through the message queue
        await race.pilot.pause(0.05)
        if [s.name for s in chart.series] == ["aiohttp"]:
            break
    assert [s.name for s in chart.series] == ["aiohttp"]
    await race.pilot.press("a")
    assert len(chart.series) == 4


async def test_quit_stops_the_session(race: Race):
    await race.advance(4)
    await race.pilot.press("q")
    await race.pilot.pause()
    assert not race.engine.started
    source = race.session.core.source
    assert isinstance(source, DemoSource)
    assert source.stacks == {}


async def test_s_takes_a_screenshot_on_the_summary_and_the_log_too(race: Race, tmp_path):
    """Dialogs are modal screens, which cut the app's bindings off: each carries `s`."""
    race.app.screenshot_dir = tmp_path
    await race.pilot.press("t")
    await race.pilot.pause()
    assert isinstance(race.app.screen, SummaryScreen)
    await race.pilot.press("s")
    await race.pilot.pause()
    assert len(list(tmp_path.glob("*.svg"))) == 1
    await race.pilot.press("escape")
    await race.pilot.press("l")
    await race.pilot.pause()
    await race.pilot.press("s")
    await race.pilot.pause()
    assert len(list(tmp_path.glob("*.svg"))) == 2


async def test_a_seed_preset_shows_its_experiment_beside_the_panes_judged_live():
    """The classic experiment's figures and claims in a strip beside the live panes,
    each claim judged on the levels measured so far by the report's own rules."""
    from stackrace.race.core.presets import load_preset
    from tests.tui.conftest import synthetic_session

    preset = load_preset("seed-002-concurrency-ceilings")
    session = synthetic_session()
    session.then = preset.then()
    p = plan(stacks=tuple(preset.stacks), concurrency=10, workload="hello")
    async for race in open_race(p, session, settle=12):
        strip = race.screen.query_one("#thennow", ThenNowStrip)
        assert strip.display
        text = str(strip.content)
        assert text.startswith("Then beside now: experiment 002")
        assert "claims: " in text and "cannot be tested here" in text
        assert "· gunicorn + gevent serves hello world with lower RPS" in text  # not yet
        slider = race.screen.query_one("#level", LevelSlider)
        slider.value = 100  # the claim's level: now it can be judged
        await race.pilot.pause()
        await race.advance(12)
        race.screen._show_then_now()
        text = str(strip.content)
        line = next(x for x in text.splitlines() if "lower RPS than the sync worker" in x)
        assert line[0] in "✓✗" and "now " in line
        # n hides it, and the panes take the width back
        await race.pilot.press("n")
        await race.pilot.pause()
        assert not strip.display


async def test_a_few_failures_under_the_rule_are_not_called_none(race: Race):
    """Failures under the rules' 1 % leave a level keeping up, but the pane must not
    read as if none failed (uWSGI's pane read "✓ no failures" beside "timeout 9")."""
    from dataclasses import replace

    import msgspec

    from stackrace.rules.breaking import StepResult
    from stackrace.rules.level import KEEPING_UP, Evidence, judge

    await race.advance(8)
    view = race.screen.last_view
    assert view is not None
    pv = next(p for p in view.panes if p.id == "uvicorn")
    assert pv.target is not None and pv.judgment is not None
    w = pv.target.total
    some = msgspec.structs.replace(w, failures={"timeout": 9}, sent=w.sent + 9)
    j = judge(Evidence(StepResult(pv.judgment.level, some)))
    assert j.state == KEEPING_UP
    pane = race.screen.query_one("#pane-uvicorn", StackPane)
    pane._show_verdict(replace(pv, judgment=j, verdict=None), rate_mode=False)
    line = race.text("#pane-uvicorn #breaking")
    assert line.startswith("✓ keeping up at c=") and "9 failed (" in line and "under 1%" in line
    assert "no failures" not in line, line
