"""`load -n 5 -d 1s` said nothing of `-d` (issue 48, "wrong and silent"): both say how
long to load, so both at once are refused in one line, exit 2, before anything starts
(docs/load.md). The real CLI; nothing listens on the URL, and nothing is sent."""

from __future__ import annotations

import pytest

from tests.hardening.cli_forks import run_forked


@pytest.mark.parametrize("how", [["-n", "5", "-d", "1s"], ["--requests", "5", "-z", "2s"]])
def test_requests_and_a_duration_together_are_refused(how: list[str]) -> None:
    r = run_forked("load", "http://127.0.0.1:9/", *how)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    # (a note naming another run on these cores may come first on a shared machine)
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("stackrace load: -n/--requests and -d/--duration both say how long")
    assert "-n 5: exactly that many requests; -d: that long" in line
