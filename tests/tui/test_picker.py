"""The stack picker: defaults, unavailable stacks, workload and mode, starting the race."""

from __future__ import annotations

from textual.widgets import RadioSet, SelectionList

from stackrace.race.core import StackChoice
from stackrace.race.demo import CATALOG as DEMO
from stackrace.race.session import RacePlan
from stackrace.race.urls import UrlTarget
from stackrace.tui.app import StackraceApp
from stackrace.tui.picker import PickerScreen
from tests.tui.conftest import SIZE, synthetic_session

# the demo's stacks plus one that is not installed, as a real catalog can have
CATALOG = [
    *DEMO,
    StackChoice(
        "php-fpm", "PHP-FPM + nginx", "prefork", available=False, reason="php-fpm8.2 not found"
    ),
]


async def test_picker_defaults_greys_unavailable_and_starts_the_race():
    session = synthetic_session()
    app = StackraceApp(session, RacePlan(), list(CATALOG), tick_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, PickerScreen)
        stacks = app.screen.query_one("#stacks", SelectionList)
        assert stacks.selected == ["gunicorn-sync", "gunicorn-gevent", "uvicorn", "aiohttp"]
        php = stacks.get_option("php-fpm")
        assert php.disabled
        assert "php-fpm8.2 not found" in str(php.prompt)
        # pick tornado as well, drop aiohttp; choose the io workload and rate mode
        stacks.select("tornado")
        stacks.deselect("aiohttp")
        workload = app.screen.query_one("#workload", RadioSet)
        await pilot.click(workload.query("RadioButton")[2])  # io
        await pilot.click(app.screen.query_one("#mode", RadioSet).query("RadioButton")[1])
        await pilot.pause()
        await pilot.press("ctrl+s")
        for _ in range(20):
            await pilot.pause(0.05)
            if app.race is not None:
                break
        assert app.race is not None
        plan = session.plan
        assert plan.stacks == ("gunicorn-sync", "gunicorn-gevent", "uvicorn", "tornado")
        assert plan.settings.workload == "io" and plan.settings.io_ms == 10
        assert plan.rate == 10.0


async def test_picker_lists_url_targets_and_refuses_an_empty_choice():
    session = synthetic_session()
    plan = RacePlan(urls=(UrlTarget("http://127.0.0.1:9/"),))
    app = StackraceApp(session, plan, list(CATALOG), tick_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        stacks = app.screen.query_one("#stacks", SelectionList)
        assert "url:0" in stacks.selected
        stacks.deselect_all()
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, PickerScreen)
        assert "at least one" in str(app.screen.query_one("#picker-error").content)
