"""A second Ctrl-C means "now" (stackrace.supervise.hurry): the first one stops the
stacks and waits up to each one's `stop_timeout` for them to go; a server that ignores
SIGTERM would hold the user that long, and the second Ctrl-C ends the wait with SIGKILL.
A real `bench` of the test stacks' `slow-to-stop` (a helper that ignores SIGTERM), its
grace made a minute long."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

from tests.conftest_stacks import processes_mentioning
from tests.helpers import CLI, ROOT, STACKS_FIXTURE, wait_for

GRACE_S = 60.0


def test_a_second_ctrl_c_ends_the_grace_at_once(tmp_path: Path) -> None:
    token = uuid.uuid4().hex  # in the stubborn helper's command line: this test's own
    stacks = tmp_path / "stacks.toml"
    text = STACKS_FIXTURE.read_text()
    assert "stop_timeout = 2.0" in text and "time.sleep(3600)" in text
    text = text.replace("stop_timeout = 2.0", f"stop_timeout = {GRACE_S}")
    stacks.write_text(text.replace("time.sleep(3600)", f"time.sleep(3600)  # {token}"))
    err = tmp_path / "stderr.txt"
    with err.open("w") as stderr:
        proc = subprocess.Popen(
            [
                *CLI, "--stacks-file", str(stacks), "bench", "--stacks", "slow-to-stop",
                "--concurrency", "1", "--duration", "60s", "--warmup", "0s", "--no-progress",
            ],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, cwd=ROOT,
        )  # fmt: skip
    try:
        assert wait_for(lambda: processes_mentioning(token), 60), err.read_text()
        time.sleep(1.0)  # started, and its level under way
        proc.send_signal(signal.SIGINT)
        # the first Ctrl-C: the stacks are asked to stop, and the helper will not
        time.sleep(4.0)
        assert proc.poll() is None, err.read_text()  # still in the minute's grace
        assert processes_mentioning(token), "the helper that ignores SIGTERM is gone already"
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        proc.wait(timeout=GRACE_S / 2)  # long before the grace would have ended
        seconds = time.monotonic() - t0
        said = err.read_text()
        assert proc.returncode == 130, said
        assert "stopping now (SIGKILL)" in said, said
        assert "Traceback" not in said, said
        assert seconds < GRACE_S / 4, (seconds, said)
        assert wait_for(lambda: not processes_mentioning(token), 10), "the helper survived"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in processes_mentioning(token):
            os.kill(pid, signal.SIGKILL)
