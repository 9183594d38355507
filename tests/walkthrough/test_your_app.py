"""The README's "Your app", walked as a user: `stackrace --app examples/flask_app:app
--go`, from another directory, opens the real app with the example under the four
common WSGI servers, each pane named `SERVER[app]` and its header naming the requests
it loads; quitting stops every server."""

from __future__ import annotations

import asyncio

import psutil
import pytest

from stackrace.cli import build_parser
from stackrace.tui.app import StackraceApp, build_session
from stackrace.tui.pane import StackPane
from tests.helpers import ROOT

pytestmark = pytest.mark.slow


async def _until(predicate, timeout: float) -> bool:
    end = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < end:
        if predicate():
            return True
        await asyncio.sleep(0.1)
    return predicate()


async def test_app_opens_the_flask_example_under_four_servers(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # a shell in another directory
    argv = ["--app", str(ROOT / "examples" / "flask_app:app"), "--path", "/:3"]
    argv += ["--path", "/slow:1", "--go"]
    args = build_parser().parse_args(argv)
    session, plan, catalog, show_picker = build_session(args)
    assert not show_picker
    assert all(c.id.endswith("[app]") for c in catalog) and len(catalog) >= 4
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    app = StackraceApp(session, plan, catalog, show_picker=False)
    async with app.run_test(size=(160, 48)) as pilot:
        assert await _until(lambda: app.race is not None and len(app.race.panes) == 4, 20)
        race = app.race
        assert race is not None
        panes = list(race.query(StackPane))
        assert sorted(p.label for p in panes) == sorted(plan.stacks)
        assert all(p.label.endswith("[app]") for p in panes), [p.label for p in panes]

        # every pane says what it loads, once it loads it
        def heads() -> list[str]:
            return [str(p.query_one("#head").content) for p in panes]

        assert await _until(lambda: all("/ ×3, /slow ×1" in h for h in heads()), 40), heads()
        await pilot.press("q")
        await pilot.pause()
    leftovers = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert not [p for p in leftovers if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
