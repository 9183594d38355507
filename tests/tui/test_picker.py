"""The stack picker: marks, count and hints, aligned columns, workers and variants,
unavailable stacks, remembered choices, URL targets, starting the race."""

from __future__ import annotations

from textual.widgets import RadioSet

from stackrace.race.choices import choices_file, load_choices
from stackrace.race.core import StackChoice
from stackrace.race.demo import CATALOG as DEMO
from stackrace.race.session import RacePlan
from stackrace.race.urls import UrlTarget
from stackrace.tui.app import StackraceApp
from stackrace.tui.picker import NAME_W, PickerScreen, StackList
from tests.tui.conftest import SIZE, synthetic_session

# the demo's stacks plus one that is not installed, as a real catalog can have, and one
# with a title longer than the name column
CATALOG = [
    *DEMO,
    StackChoice(
        "php-fpm", "PHP-FPM + nginx", "prefork", available=False, reason="php-fpm8.2 not found"
    ),
    StackChoice("long", "A stack with a very long title indeed, too long", "async"),
]


async def _start(app, pilot):  # type: ignore[no-untyped-def]
    await pilot.press("ctrl+s")
    for _ in range(20):
        await pilot.pause(0.05)
        if app.race is not None:
            break
    assert app.race is not None


async def test_picker_marks_counts_and_starts_the_race():
    session = synthetic_session()
    app = StackraceApp(session, RacePlan(), list(CATALOG), tick_interval=None, remember=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, PickerScreen)
        stacks = app.screen.query_one("#stacks", StackList)
        assert stacks.selected == ["gunicorn-sync", "gunicorn-gevent", "uvicorn", "aiohttp"]
        # a chosen stack is marked with a character, not only a colour; so is the count
        lines = [str(stacks.get_option_at_index(i).prompt) for i in range(len(stacks.rows))]
        assert lines[0].startswith("[✓] gunicorn sync")
        assert lines[4].startswith("[ ] Tornado")
        assert str(app.screen.query_one("#stacks-count").render()).startswith(
            "Stacks: 4 of 10 chosen"
        )
        assert "Space" in str(app.screen.query_one("#stacks-hint").render())
        # aligned: the family column starts at the same place on every line, long
        # titles are cut, never run into it
        assert all(line[4 + NAME_W] == " " and line[5 + NAME_W] != " " for line in lines)
        long = next(line for line in lines if "A stack with" in line)
        assert "…" in long and long[4 + NAME_W :].lstrip().startswith("async")
        # unavailable: said, and not choosable
        php = next(i for i, r in enumerate(stacks.rows) if r.id == "php-fpm")
        assert "php-fpm8.2 not found" in lines[php] and stacks.get_option_at_index(php).disabled
        # Space toggles the highlighted stack: drop gunicorn sync, then pick tornado
        stacks.focus()
        stacks.highlighted = 0
        await pilot.press("space")
        stacks.highlighted = 4
        await pilot.press("space")
        # w cycles tornado's workers (the row becomes a variant), v adds another line
        await pilot.press("w")
        await pilot.press("v")
        await pilot.pause()
        assert stacks.selected == [
            "gunicorn-gevent",
            "uvicorn",
            "aiohttp",
            "tornado:workers=2",
            "tornado:workers=4",
        ]
        workload = app.screen.query_one("#workload", RadioSet)
        await pilot.click(workload.query("RadioButton")[2])  # io
        await pilot.click(app.screen.query_one("#mode", RadioSet).query("RadioButton")[1])
        await pilot.pause()
        await _start(app, pilot)
        plan = session.plan
        assert plan.stacks[-2:] == ("tornado:workers=2", "tornado:workers=4")
        assert plan.settings.workload == "io" and plan.settings.io_ms == 10
        assert plan.rate == 10.0
        # the variants run as such: the synthetic model takes the workers
        assert session.engine.model_for("gunicorn-sync:workers=4").workers == 4
    # remembered in the user's config directory, and offered next time
    last = load_choices()
    assert last is not None and last.stacks == list(plan.stacks) and last.rate_mode
    assert choices_file().exists()
    app = StackraceApp(
        synthetic_session(), RacePlan(), list(CATALOG), tick_interval=None, remember=True
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        stacks = app.screen.query_one("#stacks", StackList)
        assert stacks.selected == list(plan.stacks)
        assert app.screen.query_one("#workload", RadioSet).pressed_button.name == "io"


async def test_demo_picker_says_synthetic_and_not_installed_never():
    app = StackraceApp(synthetic_session(), RacePlan(), list(DEMO), tick_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "SYNTHETIC DEMO" in str(app.screen.query_one("#picker-title").render())
        stacks = app.screen.query_one("#stacks", StackList)
        lines = [str(stacks.get_option_at_index(i).prompt) for i in range(len(stacks.rows))]
        assert all("synthetic model" in line for line in lines)
        assert not any("not available" in line or "not installed" in line for line in lines)


async def test_picker_lists_url_targets_with_the_url_loaded_and_refuses_an_empty_choice():
    session = synthetic_session()
    plan = RacePlan(urls=(UrlTarget("http://127.0.0.1:9"), UrlTarget("http://127.0.0.1:8/x")))
    app = StackraceApp(session, plan, list(CATALOG), tick_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        stacks = app.screen.query_one("#stacks", StackList)
        assert {"url:0", "url:1"} <= set(stacks.selected)
        first = str(stacks.get_option_at_index(0).prompt)
        assert "loads http://127.0.0.1:9/hello" in first  # no path: the workload's
        assert "loads http://127.0.0.1:8/x" in str(stacks.get_option_at_index(1).prompt)
        stacks.deselect_all()
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, PickerScreen)
        assert "at least one" in str(app.screen.query_one("#picker-error").content)


async def test_screenshot_works_on_the_picker(tmp_path):
    app = StackraceApp(
        synthetic_session(), RacePlan(), list(CATALOG), tick_interval=None, screenshot_dir=tmp_path
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("s")
        await pilot.pause()
        assert len(list(tmp_path.glob("*.svg"))) == 1
        # the command palette's screenshot goes the same way
        app.deliver_screenshot()
        await pilot.pause()
        assert len(list(tmp_path.glob("*.svg"))) == 2
