"""The logic the UI draws from stays importable without Textual (the bench uses it)."""

from __future__ import annotations

import subprocess
import sys


def test_session_ramp_and_synthetic_do_not_import_textual():
    code = (
        "import sys, stackrace.race.session, stackrace.breaking, stackrace.levels, "
        "stackrace.race.demo, "
        "stackrace.race.recording, stackrace.race.ghost, stackrace.race.talk, "
        "stackrace.race.explain, stackrace.race.warmup, stackrace.race.summary, "
        "stackrace.race.choices, stackrace.commands.web, stackrace.commands.replay, "
        "stackrace.race.verdicts, stackrace.race.wedge, stackrace.race.cleanstart, "
        "stackrace.race.thennow, stackrace.stacks.listen, stackrace.stacks.logwatch, "
        "stackrace.tui.format, stackrace.tui.plot, stackrace.tui.args; "
        "sys.exit('textual' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
