"""Runs that know about each other (issue 36): a second `bench` on the cores a running
one uses refuses, naming it, unless --share-cores, and then says so in its output.
Two real stackrace processes, one lock directory of their own."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import CLI, ROOT, STACKS_FIXTURE, run_cli

pytestmark = [pytest.mark.slow]


def test_a_second_run_on_the_same_cores_refuses_or_says_so(tmp_path: Path) -> None:
    env = {"STACKRACE_LOCKS_DIR": str(tmp_path / "locks")}
    first = subprocess.Popen(
        [*CLI, "--stacks-file", str(STACKS_FIXTURE), "bench", "--stacks", "plain",
         "--concurrency", "2,4,8", "--duration", "3s", "--warmup", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, **env}, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert first.stderr is not None
        end = time.monotonic() + 60
        while time.monotonic() < end and "plain: starting" not in first.stderr.readline():
            pass
        args = ["--stacks-file", str(STACKS_FIXTURE), "bench", "--stacks", "plain",
                "--concurrency", "2", "--duration", "0.5s", "--warmup", "0"]  # fmt: skip
        refused = run_cli(*args, env=env)
        assert refused.returncode == 75, refused.stdout + refused.stderr
        assert f"another stackrace run uses these cores (pid {first.pid}: stackrace bench" in (
            refused.stderr
        )
        assert "--share-cores" in refused.stderr and "Traceback" not in refused.stderr
        out = tmp_path / "shared.json"
        shared = run_cli(*args, "--share-cores", "--json", str(out), env=env)
        assert shared.returncode == 0, shared.stdout + shared.stderr
        notes = json.loads(out.read_text())["notes"]
        assert any(f"pid {first.pid}: stackrace bench" in n for n in notes), notes
    finally:
        first.terminate()
        first.wait(timeout=30)
    # the first run is over: its lock went with it, and nothing refuses now
    again = run_cli(
        "--stacks-file", str(STACKS_FIXTURE), "bench", "--stacks", "plain", "--concurrency", "2",
        "--duration", "0.5s", "--warmup", "0", env=env,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
