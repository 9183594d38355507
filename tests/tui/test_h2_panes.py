"""An HTTP/1.1 pane beside an h2 pane, in the app on the synthetic stream: each pane's
head says its protocol, its connections × streams, the streams open, GOAWAYs and
resets; the slider reads "in flight" and the status line says how a level is split
("h1: 100 connections · h2: 4 connections x 25 streams"). The words come from
race/core/streams.py (tests/unit/test_h2_streams.py); the synthetic engine has no
HTTP/2 of its own, so the session's view is given the h2 side the way the real session
builds it (`streams.pane_words`, `streams.header_line`) and the screen draws it."""

from __future__ import annotations

from dataclasses import replace

from textual.widgets import Select

from stackrace.race.core import streams
from stackrace.race.core.members import StackChoice
from stackrace.race.core.plan import RacePlan
from stackrace.stacks import protocols
from stackrace.stacks.catalogue import load_stacks
from stackrace.tui.app import StackraceApp
from stackrace.tui.pane import StackPane, pane_widget_id
from stackrace.tui.stack_list import StackList, TuneScreen
from tests.tui.conftest import SIZE, open_race, plan, synthetic_session

STREAMS = 25


def _with_h2_side(session, https: dict[str, str]) -> None:
    """The session's view given its h2 side as the real session makes it."""
    polled = session.poll

    async def poll():
        view = await polled()
        panes = [
            replace(
                p,
                protocol=streams.pane_words(
                    https[p.id], 100, STREAMS, p.target.interval if p.target else None, True
                ),
            )
            for p in view.panes
        ]
        split = streams.header_line(100, STREAMS, list(https.values()))
        return replace(view, panes=panes, load_split=split)

    session.poll = poll  # a test's view of an h2 race


async def test_h1_and_h2_panes_say_their_protocol_and_the_header_the_split():
    async for race in open_race(plan(stacks=("uvicorn", "aiohttp"), concurrency=100), settle=2):
        # aiohttp stands for an h2 variant: its words as the session makes them
        _with_h2_side(race.session, {"uvicorn": "1.1", "aiohttp": "2"})
        await race.advance(16)
        h1 = race.text(f"#{pane_widget_id('uvicorn')} #head")
        h2 = race.text(f"#{pane_widget_id('aiohttp')} #head")
        assert " · h1" in h1 and "h2" not in h1.replace("h1", "")
        # an h2 pane's head starts with its protocol, each figure whole (the family and
        # the path after, as the width allows): `c=1 · 1 open` would count connections
        assert h2.startswith("h2 4×25 · ") and " GOAWAY · " in h2 and " RST" in h2, h2
        assert " streams · " in h2 or " open · " in h2, h2
        assert "c=" not in h2, h2
        status = race.text("#status-line")
        assert "h1: 100 connections · h2: 4 connections x 25 streams" in status
        assert "in flight" in race.text("#mode-label")
        pane = race.screen.query_one(f"#{pane_widget_id('aiohttp')}", StackPane)
        assert pane.display


async def test_a_race_of_http_1_1_alone_reads_as_it_always_did():
    async for race in open_race(plan(stacks=("uvicorn", "aiohttp"), concurrency=100), settle=16):
        for mid in ("uvicorn", "aiohttp"):
            head = race.text(f"#{pane_widget_id(mid)} #head")
            assert " · h1" not in head and " · h2" not in head
        assert "connections" in race.text("#mode-label")
        assert "h2:" not in race.text("#status-line")


async def test_the_pickers_settings_offer_the_protocols_a_stack_serves():
    """`p` on a stack with h2 variants: its `http` is a choice of what its block serves
    (stacks.protocols.choice, from the real stacks file); h2c makes the row its variant."""
    spec = load_stacks()["hypercorn"]
    hyper = StackChoice("hypercorn", "Hypercorn", "async", tunables=tuple(protocols.choice(spec)))
    assert [t.choices for t in hyper.tunables] == [("1.1", "2", "h2c")]
    assert protocols.choice(load_stacks()["gunicorn-sync"]) == []
    app = StackraceApp(synthetic_session(), RacePlan(), [hyper], tick_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        stacks = app.screen.query_one("#stacks", StackList)
        stacks.focus()
        stacks.highlighted = 0
        await pilot.press("p")
        await pilot.pause()
        assert isinstance(app.screen, TuneScreen)
        select: Select[str] = app.screen.query_one("#tune-http", Select)
        assert select.value == "1.1"
        select.value = "h2c"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert stacks.selected == ["hypercorn:http=h2c"]
