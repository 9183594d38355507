"""The stack picker: marks, count and hints, aligned columns, workers and variants,
unavailable stacks, remembered choices, URL targets, starting the race."""

from __future__ import annotations

from textual.pilot import Pilot
from textual.widgets import Input, RadioSet, Select, Static

from stackrace.race.core.members import StackChoice
from stackrace.race.core.plan import RacePlan
from stackrace.race.core.urls import UrlTarget
from stackrace.race.live.choices import choices_file, load_choices
from stackrace.race.live.demo import CATALOG as DEMO
from stackrace.stacks.tunables import Tunable
from stackrace.tui.app import StackraceApp
from stackrace.tui.picker import PickerScreen
from stackrace.tui.stack_list import StackList, TuneScreen
from tests.tui.conftest import SIZE, recording_engine, synthetic_session

# the demo's stacks plus one that is not installed, as a real catalog can have, and one
# with a title longer than the name column
CATALOG = [
    *DEMO,
    StackChoice(
        "php-fpm", "PHP-FPM + nginx", "prefork", available=False, reason="php-fpm8.2 not found"
    ),
    StackChoice("long", "A stack with a very long title indeed, too long", "async"),
]


async def _start(app: StackraceApp, pilot: Pilot[int]) -> None:
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
        w = stacks.name_w
        assert all(line[4 + w] == " " and line[5 + w] != " " for line in lines)
        long = next(line for line in lines if "A stack with" in line)
        assert long[4 + w :].lstrip().startswith("async")
        # the names take the width the list has: a long title is whole when it fits
        assert "A stack with a very long title indeed, too long" in long
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
        assert recording_engine(session).model_for("gunicorn-sync:workers=4").workers == 4
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
        pressed = app.screen.query_one("#workload", RadioSet).pressed_button
        assert pressed is not None and pressed.name == "io"


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
        assert "at least one" in str(app.screen.query_one("#picker-error", Static).content)


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


# stacks with the settings of the real stacks file's (stacks.tunables): workers and a
# param with choices, threads only, a param without choices and no workers
TUNED = [
    StackChoice(
        "php-fpm-nginx",
        "PHP-FPM + nginx",
        "prefork",
        tunables=(
            Tunable("workers", "1", numeric=True),
            Tunable("opcache", "on", ("on", "off")),
        ),
    ),
    StackChoice(
        "waitress",
        "waitress",
        "threaded",
        threads=8,
        tunables=(Tunable("threads", "8", numeric=True),),
    ),
    StackChoice("aiohttp", "aiohttp", "async", tunables=(Tunable("db_pool", "16"),)),
]


async def test_picker_keys_for_threads_and_every_param_and_variants_race():
    """t steps threads, p opens every setting (a choice list, free text), v copies a
    stack with no workers into a variant of its own; every such row races with a pane
    of its own (its id a slug: a variant's name is no valid widget id)."""
    session = synthetic_session()
    app = StackraceApp(session, RacePlan(), TUNED, tick_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        stacks = app.screen.query_one("#stacks", StackList)
        stacks.focus()
        stacks.highlighted = 1
        await pilot.press("t")  # waitress: 8 → 16 threads
        stacks.highlighted = 0
        await pilot.press("w")  # php: 2 workers
        await pilot.press("p")  # php: opcache off, in the dialog
        await pilot.pause()
        assert isinstance(app.screen, TuneScreen)
        select: Select[str] = app.screen.query_one("#tune-opcache", Select)
        select.value = "off"
        workers = app.screen.query_one("#tune-workers", Input)
        assert workers.value == "2"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, PickerScreen)
        stacks.highlighted = 2
        await pilot.press("space")
        await pilot.press("v")  # aiohttp has no workers: its copy opens the dialog
        await pilot.pause()
        assert isinstance(app.screen, TuneScreen)
        pool = app.screen.query_one("#tune-db_pool", Input)
        pool.value = "4,5"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "without a comma" in str(app.screen.query_one("#tune-error", Static).content)
        # the launcher's own rule for a value (stacks.tunables.check_kind): no path, no zero
        pool.value = "../../victim"
        await pilot.press("ctrl+s")
        await pilot.pause()
        problem = str(app.screen.query_one("#tune-error", Static).content)
        assert "db_pool: '../../victim' is not" in problem, problem
        assert isinstance(app.screen, TuneScreen)  # still open: nothing applied
        pool.value = "4"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert stacks.selected == [
            "php-fpm-nginx:workers=2,opcache=off",
            "waitress:threads=16",
            "aiohttp",
            "aiohttp:db_pool=4",
        ]
        line = str(stacks.get_option_at_index(0).prompt)
        assert "2 workers · opcache=off" in line
        # a key for a setting the stack does not have says so, and changes nothing
        stacks.highlighted = 2
        await pilot.press("w")
        await pilot.pause()
        assert stacks.selected[2] == "aiohttp"
        await _start(app, pilot)
        race = app.race
        assert race is not None  # (_start waited for it)
        await race.tick()
        await pilot.pause()
        panes = race.panes
        assert set(panes) == set(stacks.selected)
        ids = {p.id for p in panes.values()}
        assert "pane-aiohttp" in ids and len(ids) == 4


async def test_your_requests_replace_the_workload_choice():
    """With --path (or --scenario) the load is your requests: the picker shows them and
    offers no workload of stackrace's own apps, which your app does not serve."""
    from stackrace.settings.race_settings import RaceSettings

    settings = RaceSettings(paths=["/:3", "/slow:1"])
    session = synthetic_session()
    app = StackraceApp(session, RacePlan(settings=settings), list(CATALOG), tick_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, PickerScreen)
        shown = str(app.screen.query_one("#own-requests").render())
        assert "/ ×3, /slow ×1" in shown
        assert not app.screen.query("#workload") and not app.screen.query("#io-delay")
        await _start(app, pilot)
        assert app.session.core.settings.paths == settings.paths
