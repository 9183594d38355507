"""The log view (`l`) shows a stack's name and its log as text: markup in a name
(`[$accent]`, `[b]`) is not styled away, an escape sequence in a log line is shown as
`\\x1b`, never sent to the terminal (issue 48, item 1). The real app, the real screen."""

from __future__ import annotations

from textual.widgets import Label, Log

from stackrace.race.live.demo import CATALOG
from stackrace.tui.app import StackraceApp
from stackrace.tui.dialogs import LogScreen
from tests.tui.conftest import SIZE, plan, synthetic_session

NAME = "evil[$accent] [b]bold[/b]"
LOG = "\x1b]0;PWNED\x07\x1b[2J\nnext line"


async def test_the_log_view_shows_a_hostile_name_and_log_as_text() -> None:
    session = synthetic_session()
    app = StackraceApp(session, plan(), list(CATALOG), show_picker=False, tick_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(100):
            if session.core.members:
                break
            await pilot.pause(0.05)
        member_id, member = next(iter(session.core.members.items()))
        # a server whose log holds an escape sequence (the synthetic stack's own log is
        # ours): what the session hands the view is made printable (Session.log_text)
        member.handle.log_tail = lambda lines=20: LOG.splitlines()  # type: ignore[method-assign]
        await app.push_screen(LogScreen(NAME, session.log_text(member_id)))
        await pilot.pause()
        title = app.screen.query_one(Label)
        assert str(title.render()).startswith(f"Log: {NAME}"), title.render()
        lines = list(app.screen.query_one(Log).lines)
        assert lines == ["\\x1b]0;PWNED\\x07\\x1b[2J", "next line"], lines
        await pilot.press("escape")
