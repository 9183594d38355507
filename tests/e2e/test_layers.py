"""The logic the UI draws from stays importable without Textual (the bench uses it)."""

from __future__ import annotations

import subprocess
import sys


def test_session_ramp_and_synthetic_do_not_import_textual():
    code = (
        "import sys, stackrace.race.live.session, stackrace.rules.breaking, "
        "stackrace.rules.level_log, stackrace.race.live.demo, "
        "stackrace.race.playback.recording, stackrace.race.playback.ghost, "
        "stackrace.race.live.talk, "
        "stackrace.race.live.explain, stackrace.rules.warmup, stackrace.race.live.summary, "
        "stackrace.race.live.choices, stackrace.commands.web, stackrace.commands.replay, "
        "stackrace.race.live.verdicts, stackrace.rules.wedge, stackrace.race.core.cleanstart, "
        "stackrace.race.live.thennow, stackrace.stacks.listen, stackrace.stacks.logwatch, "
        "stackrace.tui.format, stackrace.tui.plot, stackrace.commands.app_args; "
        "sys.exit('textual' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
