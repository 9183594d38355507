"""Nothing escapes: a stack's processes that left its session — a `setsid sleep` started
by the server, a double-forked daemon — are gone after stackrace quits (Ctrl-C, or a run
that ends) and after stackrace is SIGKILLed (the watchdog). The real CLI, a real server
that leaves those two behind (tests/servers/escaping_server.py), a shell wrapper given
with --cmd that does the same."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import CLI, ROOT, run_cli, wait_for

pytestmark = pytest.mark.slow

ESCAPING = ROOT / "tests" / "servers" / "escaping_server.py"


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :][:1] != b"Z"


def _stacks_file(tmp_path: Path) -> tuple[Path, Path]:
    pids = tmp_path / "escaped.pids"
    f = tmp_path / "stacks.toml"
    f.write_text(
        f'[stacks.escaping]\ncommand = ["{sys.executable}", "{ESCAPING}", "{{port}}", "{pids}"]\n'
    )
    return f, pids


def _escaped(pids: Path) -> list[int]:
    assert wait_for(lambda: pids.exists() and pids.read_text().strip(), 20.0), "no pid file"
    *found, server = [int(p) for p in pids.read_text().split()]
    assert len(found) == 2 and all(_running(p) for p in found), found
    for pid in found:  # they did leave the stack's session
        assert os.getsid(pid) != os.getsid(server)
    return found


def _serve(tmp_path: Path, stacks: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [*CLI, "--stacks-file", str(stacks), "serve", "escaping"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env={**os.environ, "STACKRACE_HOME": str(tmp_path / "home")},
    )
    assert proc.stdout is not None
    end = time.monotonic() + 60
    while time.monotonic() < end:  # until the stack is up (its URL is printed)
        line = proc.stdout.readline()
        if "http://127.0.0.1:" in line or not line:
            break
    return proc


def test_what_left_the_session_is_gone_after_ctrl_c(tmp_path: Path) -> None:
    stacks, pids = _stacks_file(tmp_path)
    proc = _serve(tmp_path, stacks)
    try:
        escaped = _escaped(pids)
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
        assert wait_for(lambda: not any(_running(p) for p in escaped), 10.0), [
            p for p in escaped if _running(p)
        ]
    finally:
        proc.kill()
        proc.wait()


def test_what_left_the_session_is_gone_after_sigkill(tmp_path: Path) -> None:
    stacks, pids = _stacks_file(tmp_path)
    proc = _serve(tmp_path, stacks)
    try:
        escaped = _escaped(pids)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        # the watchdog: SIGTERM, its grace (2 s), SIGKILL
        assert wait_for(lambda: not any(_running(p) for p in escaped), 15.0), [
            p for p in escaped if _running(p)
        ]
    finally:
        proc.kill()
        proc.wait()


def test_a_run_that_ends_leaves_nothing_of_a_cmd_wrapper(tmp_path: Path) -> None:
    """`--cmd` with a shell that starts `(setsid sleep &)` before the server."""
    mark = tmp_path / "sleeper.pid"
    server = ROOT / "tests" / "servers" / "testserver.py"
    cmd = (
        f'w=sh -c \'(setsid sh -c "echo \\$\\$ > {mark}; exec sleep 1000" &); '
        f"exec {sys.executable} {server} {{port}}'"
    )
    r = run_cli(
        "bench",
        "--cmd",
        cmd,
        "--path",
        "/hello",
        "--duration",
        "0.5s",
        "--warmup",
        "0s",
        "--concurrency",
        "1",
        "--no-progress",
        env={"STACKRACE_HOME": str(tmp_path / "home")},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert mark.exists()
    sleeper = int(mark.read_text())
    assert wait_for(lambda: not _running(sleeper), 10.0), f"sleep {sleeper} outlived the run"


_DRIVER = """
import asyncio, sys
from stackrace.settings.parsers import COMMAND_LINE
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.variants import resolve
from stackrace.stacks.launcher import Launcher
from stackrace.supervise import sweep
if sys.argv[3] == "no-cgroup":
    sweep.tracking_cgroup = lambda name: None  # a machine without cgroups of its own
sweep.become_subreaper()  # as the stackrace command is (cli.main)
async def main():
    launcher = Launcher(sys.argv[2])
    rs = await launcher.start(resolve("escaping", load_stacks(sys.argv[1]), named_in=COMMAND_LINE))
    print(rs.cgroup_dir, flush=True)
    if sys.argv[4] == "stop":
        await asyncio.sleep(1.0)
        await launcher.stop_all()
        launcher.close()
        print("stopped", flush=True)
    else:
        await asyncio.sleep(60)
asyncio.run(main())
"""


@pytest.mark.parametrize("ending", ["stop", "sigkill"])
def test_without_a_cgroup_the_token_and_the_subreaper_find_them(
    tmp_path: Path, ending: str
) -> None:
    """Where no cgroup can be made (a desktop without root), the environment token,
    the process tree and the subreaper (supervise.sweep) still find both."""
    stacks, pids = _stacks_file(tmp_path)
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, str(stacks), str(tmp_path / "runs"), "no-cgroup", ending],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert driver.stdout is not None
        assert driver.stdout.readline().strip() == "None"  # no cgroup: the other ways
        escaped = _escaped(pids)
        if ending == "stop":
            assert driver.stdout.readline().strip() == "stopped"
            assert not any(_running(p) for p in escaped)
        else:
            os.kill(driver.pid, signal.SIGKILL)
            assert wait_for(lambda: not any(_running(p) for p in escaped), 15.0)
    finally:
        driver.kill()
        driver.wait()
