"""Faults around starting and stopping stacks: SIGKILL, Ctrl-C during start-up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from tests.helpers import CLI, STACKS_FIXTURE, wait_for

SERVE = ["serve", "never", "next", "--no-db"]


def pids_with(token: str) -> list[int]:
    """Live processes whose command line holds `token` (a stack's unique marker)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes()
            state = Path(f"/proc/{entry.name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if token.encode() in cmdline and state != b"Z":
            found.append(int(entry.name))
    return found


def test_sigkill_leaves_no_short_run_dir(tmp_path: Path) -> None:
    """With a runs path too long for sockets, a stack runs in a short dir under the temp
    dir. SIGKILL stackrace: the watchdog kills the stack, moves its log back under the
    runs dir and removes the short dir (it used to stay behind)."""
    runs = tmp_path / ("r" * (90 - len(str(tmp_path))))
    script = textwrap.dedent(
        f"""
        import asyncio
        from stackrace.stacks.catalogue import load_stacks
        from stackrace.stacks.variants import resolve
        from stackrace.stacks.launcher import Launcher
        async def main():
            launcher = Launcher()
            rs = await launcher.start(resolve("plain", load_stacks({str(STACKS_FIXTURE)!r})))
            print(rs.run_dir, rs.main.pid, flush=True)
            await asyncio.sleep(60)
        asyncio.run(main())
        """
    )
    driver = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "STACKRACE_RUNS_DIR": str(runs)},
    )
    assert driver.stdout is not None
    short_dir, pid = driver.stdout.readline().split()
    short = Path(short_dir)
    assert short.parent == Path(tempfile.gettempdir()) and short.name.startswith("stackrace-plain-")
    (link,) = [p for p in runs.glob("*/plain")]  # a plain name is its own slug
    assert link.is_symlink()
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    assert wait_for(lambda: not short.exists(), 10), f"{short} left behind"
    assert wait_for(lambda: not Path(f"/proc/{pid}").exists(), 5)
    assert link.is_dir() and not link.is_symlink()
    assert (link / "log.txt").exists()  # the stack's log was kept


def test_ctrl_c_during_serve_start_up_stops_at_once(tmp_path: Path) -> None:
    """A stack that will never be ready (ready_timeout 60 s): Ctrl-C ends `serve` in a
    moment, stops what it started and starts nothing more."""
    token = f"stackrace-test-{uuid.uuid4().hex[:8]}"
    stacks = tmp_path / "stacks.toml"
    stacks.write_text(
        textwrap.dedent(
            f"""
            [stacks.never]
            title = "never ready"
            language = "python"
            family = "sync"
            command = ["{{python}}", "{{root}}/tests/servers/testserver.py", "{{port}}", "0",
                       "{token}-never"]
            health = "/status?code=500"
            ready_timeout = 60.0
            stop_timeout = 2.0

            [stacks.next]
            title = "would start after"
            language = "python"
            family = "sync"
            command = ["{{python}}", "{{root}}/tests/servers/testserver.py", "{{port}}", "0",
                       "{token}-next"]
            """
        )
    )
    serve = subprocess.Popen(
        [*CLI, "--stacks-file", str(stacks), *SERVE],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "STACKRACE_RUNS_DIR": str(tmp_path / "runs")},
    )
    try:
        assert wait_for(lambda: bool(pids_with(f"{token}-never")), 20)
        time.sleep(0.3)  # well inside its start-up (it answers 500 to every probe)
        t0 = time.monotonic()
        serve.send_signal(signal.SIGINT)
        _, err = serve.communicate(timeout=20)
        took = time.monotonic() - t0
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
    assert took < 4.0, f"took {took:.1f} s"
    assert serve.returncode == 130, err
    assert "interrupted while starting" in err and "Traceback" not in err
    assert wait_for(lambda: not pids_with(token), 5), pids_with(token)


@pytest.mark.parametrize("flag", [True, False])
def test_the_app_accepts_allow_remote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flag: bool
) -> None:
    """The app's refusal of a remote --url tells the user to pass --allow-remote, before
    the screen opens: the app takes that option and gives it to its engine."""
    from stackrace.cli import build_parser
    from stackrace.commands.app_args import app_options
    from stackrace.engine.client import Engine
    from stackrace.race.core.stack_source import StacksFileSource
    from stackrace.race.live.setup import AppSetupError, build_session

    monkeypatch.setenv("STACKRACE_RUNS_DIR", str(tmp_path))
    argv = ["--url", "http://10.254.0.1/"] + (["--allow-remote"] if flag else [])
    args = build_parser().parse_args(argv)
    assert args.allow_remote is flag
    if not flag:
        with pytest.raises(AppSetupError, match="unless you pass --allow-remote"):
            build_session(app_options(args))
        return
    session, *_ = build_session(app_options(args))
    try:
        assert isinstance(session.engine, Engine) and session.engine.allow_remote is flag
    finally:
        source = session.core.source
        assert isinstance(source, StacksFileSource)
        source.launcher.close()
