"""Ctrl-C, SIGTERM or SIGHUP during `stackrace bench`: every level measured is kept and
written."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from stackrace.report.schema import loads
from tests.helpers import CLI, ROOT, STACKS_FIXTURE


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_interrupted_bench_writes_what_it_measured(tmp_path: Path, sig: signal.Signals):
    # half-second levels: the signal follows the c=4 line at once, and the four levels
    # left would still take ~3 s, so it lands mid-run as with 1 s levels
    out = tmp_path / "run.json"
    md = tmp_path / "run.md"
    proc = subprocess.Popen(
        [
            *CLI, "--stacks-file", str(STACKS_FIXTURE), "bench",
            "--stacks", "plain", "--concurrency", "2,4,8,16,32,64", "--duration", "0.5s",
            "--warmup", "0.2s", "--json", str(out), "--markdown", str(md),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )  # fmt: skip
    assert proc.stderr is not None
    seen = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        seen.append(line)
        if "c=4 " in line:  # two levels measured
            break
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, (stdout, "".join(seen) + stderr)
    assert "Traceback" not in stderr
    assert "interrupted" in stderr
    run = loads(out.read_bytes())
    assert run.interrupted == {signal.SIGINT: "Ctrl-C"}.get(sig, sig.name)
    levels = [lv.concurrency for lv in run.stacks[0].levels]
    assert levels[:2] == [2, 4] and len(levels) < 6
    assert json.loads(out.read_text())["interrupted"]
    assert "| plain" in md.read_text()
