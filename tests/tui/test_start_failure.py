"""A race that cannot start never leaves a blank screen: the app stops what it started,
quits by itself, and the command prints one line and exits 1. Here the recording file
cannot be made (its directory is a file), the way `--record` into a read-only
directory failed: a toast over a blank screen that `q` did not quit."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackrace.race.live.demo import CATALOG
from stackrace.race.live.session_recorder import Recorder
from stackrace.tui.app import StackraceApp, exit_status
from tests.tui.conftest import SIZE, plan, synthetic_session


async def test_a_start_that_fails_quits_with_one_line_and_status_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    session = synthetic_session()
    session.listeners.append(Recorder(blocker / "race.jsonl.gz"))
    app = StackraceApp(session, plan(), list(CATALOG), show_picker=False, tick_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(100):
            if app._exit:
                break
            await pilot.pause(0.05)
        assert app._exit, "the app sat on its screen after the start failed"
        assert app.race is None  # no race screen was opened
    rc = exit_status(app, app.return_code or 0)
    assert rc == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("stackrace: could not start:"), err
    assert "not-a-directory" in err[0]
