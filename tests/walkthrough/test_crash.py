"""A bug of ours while the app races real servers: exit 70, one line naming a crash
log, and nothing left running."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from tests.helpers import ROOT
from tests.walkthrough.terminal import run_in_terminal, wait_none_left

# the app, with a pane that raises on its 20th draw (about five seconds into the race,
# the stack up and loaded): an unexpected exception in the UI, as a real bug would be
CRASHING_APP = textwrap.dedent(
    """
    import sys
    from stackrace.tui import pane
    show = pane.StackPane.show
    calls = []
    def buggy(self, *args, **kw):
        calls.append(1)
        if len(calls) == 20:
            raise RuntimeError("a bug in the pane")
        return show(self, *args, **kw)
    pane.StackPane.show = buggy
    from stackrace.cli import main
    sys.exit(main(sys.argv[1:]))
    """
)


def test_a_crash_exits_70_with_one_line_and_leaves_nothing_running(tmp_path: Path):
    ran = run_in_terminal(
        [
            sys.executable,
            "-c",
            CRASHING_APP,
            "--stacks-file",
            str(ROOT / "tests" / "stacks_fixture.toml"),
            "--stacks",
            "plain,plain:workers=2",
            "--go",
            "-c",
            "5",
        ],
        timeout=60,
        cwd=tmp_path,
        env={"STACKRACE_HOME": str(tmp_path / "home")},
    )
    assert ran.status == 70, ran.tail()
    lines = [line for line in ran.tail(40).splitlines() if "internal error" in line]
    assert len(lines) == 1, ran.tail(40)
    assert "RuntimeError: a bug in the pane" in lines[0]
    log = Path(lines[0].split("details in ", 1)[1].strip())
    assert log.is_file() and "a bug in the pane" in log.read_text()
    assert log.stat().st_mode & 0o077 == 0  # the command line may hold a token
    assert "Traceback" not in ran.text  # the traceback is in the log, not on the screen
    assert wait_none_left(ran.mark) == [], "processes left running after the crash"
