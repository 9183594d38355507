"""The README's "Your app", walked as a user: `stackrace --app examples/flask_app:app
--go`, from another directory, opens the real app with the example under the four
common WSGI servers, each pane named `SERVER[app]` and its header naming the requests
it loads; quitting stops every server. `--url NAME=URL` races servers started by hand
under their names."""

from __future__ import annotations

import re

import psutil
import pytest
from textual.widgets import Static

from stackrace.cli import build_parser
from stackrace.commands.app_args import app_options
from stackrace.race.live.setup import AppSetupError, build_session
from stackrace.tui.app import StackraceApp
from stackrace.tui.pane import StackPane
from tests.helpers import ROOT, TestServer, until

pytestmark = pytest.mark.slow


async def test_app_opens_the_flask_example_under_four_servers(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # a shell in another directory
    argv = ["--app", str(ROOT / "examples" / "flask_app:app"), "--path", "/:3"]
    argv += ["--path", "/slow:1", "--go"]
    args = build_parser().parse_args(argv)
    session, plan, catalog, show_picker = build_session(app_options(args))
    assert not show_picker
    assert all(c.id.endswith("[app]") for c in catalog) and len(catalog) >= 4
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    app = StackraceApp(session, plan, catalog, show_picker=False)
    async with app.run_test(size=(160, 48)) as pilot:
        assert await until(lambda: app.race is not None and len(app.race.panes) == 4, 20)
        race = app.race
        assert race is not None
        panes = list(race.query(StackPane))
        assert sorted(p.name_text for p in panes) == sorted(plan.stacks)
        assert all(p.name_text.endswith("[app]") for p in panes), [p.name_text for p in panes]
        # --go skipped the picker: the servers left out are named (as bench names them)
        others = [c.id for c in catalog if c.id not in plan.stacks]
        if others:
            assert plan.note.endswith(f"also possible: {', '.join(others)} (--stacks to choose)")
            (shown,) = [n for n in app._notifications if n.message == plan.note]
            # as written: "[app]" in the names is not read as markup (it vanished once,
            # and "gunicorn-gthread" alone names the shipped stack, not the app's)
            assert not shown.markup and "[app]" in shown.message
        else:
            assert plan.note == ""

        # every pane says what it loads, once it loads it
        def heads() -> list[str]:
            return [str(p.query_one("#head", Static).content) for p in panes]

        assert await until(lambda: all("/ ×3, /slow ×1" in h for h in heads()), 40), heads()
        await pilot.press("q")
        await pilot.pause()
    assert await until(lambda: not _left(before), 15), _left(before)


def _left(before: set[int]) -> list[psutil.Process]:
    """Processes started since `before` that still run (an engine or a server that is
    still on its way out is waited for, up to a ceiling, not counted at once)."""
    out = []
    for p in psutil.Process().children(recursive=True):
        if p.pid in before:
            continue
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            continue
    return out


async def test_app_races_servers_started_by_hand_under_their_names(tmp_path, monkeypatch) -> None:
    """`stackrace --url mine=URL --pid PID --url URL --path /hello:3 --path /json:1 --go`:
    one pane per server, titled with the name given (or host:port), its header naming
    the requests loaded; memory and CPU of the one given --pid, "not sampled" for the
    other; quitting leaves both servers running (they are not stackrace's)."""
    monkeypatch.chdir(tmp_path)
    a, b = TestServer(), TestServer()
    try:
        argv = ["--url", f"mine={a.url('')}", "--pid", str(a.proc.pid), "--url", b.url("")]
        argv += ["--path", "/hello:3", "--path", "/json:1", "--go"]
        session, plan, catalog, show_picker = build_session(
            app_options(build_parser().parse_args(argv))
        )
        assert not show_picker
        app = StackraceApp(session, plan, catalog, show_picker=False)
        async with app.run_test(size=(160, 48)) as pilot:
            assert await until(lambda: app.race is not None and len(app.race.panes) == 2, 20)
            assert app.race is not None
            panes = {p.name_text: p for p in app.race.query(StackPane)}
            other = f"127.0.0.1:{b.port}"
            assert sorted(panes) == sorted(["mine", other])

            def text(label: str, part: str) -> str:
                return str(panes[label].query_one(f"#{part}", Static).content)

            def shown() -> bool:
                heads = all("/hello ×3, /json ×1" in text(n, "head") for n in panes)
                return heads and "RSS" in text("mine", "memory")

            assert await until(shown, 20), {n: text(n, "head") for n in panes}
            assert "not sampled" not in text("mine", "memory")
            assert await until(lambda: "RSS not sampled" in text(other, "memory"), 10)
            assert "CPU not sampled (give --pid)" in text(other, "memory")
            await pilot.press("q")
            await pilot.pause()
        for s in (a, b):  # raced, and still running: not ours to stop
            assert s.proc.poll() is None
            assert s.stats()["by_path"]["/json"] > 0
    finally:
        a.kill()
        b.kill()


def test_the_apps_url_options_are_checked_before_the_screen_opens() -> None:
    cases = {
        ("--url", "far=http://10.254.0.1:80", "--go"): "is not on loopback",
        ("--url", "x=http://127.0.0.1:9/a", "--path", "/b", "--go"): "has a path of its own",
        ("--url", "http://127.0.0.1:9", "--pid", "1", "--pid", "2"): "--pid 2 has no --url",
    }
    for argv, expected in cases.items():
        with pytest.raises(AppSetupError, match=re.escape(expected)):
            build_session(app_options(build_parser().parse_args(list(argv))))


def test_a_stack_that_is_none_is_one_line_with_the_ones_there_are() -> None:
    """`--stacks 'uvicorn-wsgi[app]' --go` with `--app` said only "no stack … in the
    stacks file": your app's stacks are not in `stackrace stacks`, so the line names
    them; a misspelt stack gets the nearest names; the name is escaped (it is the user's
    text, and the error is written to a terminal)."""
    app = ["--app", str(ROOT / "examples" / "flask_app:app")]
    cases = {
        (*app, "--stacks", "uvicorn-wsgi[app]", "--go"): (
            "no stack 'uvicorn-wsgi[app]': your app's: ",
            "gunicorn-sync[app]",
        ),
        ("--stacks", "gunicorn-sinc", "--go"): ("did you mean gunicorn-sync", "stackrace stacks"),
        ("--stacks", "evil\x1b[31m", "--go"): ("no stack 'evil\\x1b[31m'", "stackrace stacks"),
    }
    for argv, said in cases.items():
        with pytest.raises(AppSetupError) as err:
            build_session(app_options(build_parser().parse_args(list(argv))))
        line = str(err.value)
        assert "\n" not in line and "\x1b" not in line, line
        assert all(s in line for s in said), line
