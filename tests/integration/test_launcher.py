"""The launcher with real processes: start, readiness, crashes, clean stops, SIGKILL."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from stackrace.engine.client import Engine
from stackrace.engine.model import TargetSpec
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.launcher import Launcher
from stackrace.stacks.running import CRASHED, READY, STOPPED, LaunchError
from stackrace.stacks.sampler import TreeSampler
from stackrace.stacks.variants import resolve
from stackrace.supervise.procs import pids_in_sessions
from tests.helpers import STACKS_FIXTURE, until, wait_for

STACKS = load_stacks(STACKS_FIXTURE)


def stack(name: str):
    return resolve(name, STACKS)


async def test_start_load_stop_leaves_nothing(tmp_path):
    async with Launcher(tmp_path) as launcher:
        rs = await launcher.start(stack("forking"))
        assert rs.state == READY and rs.url.startswith("http://127.0.0.1:")
        pids = rs.all_pids()
        assert len(pids) == 2  # the parent and the worker it forked
        async with Engine() as engine:
            await engine.add_target(TargetSpec(id="f", url=rs.url + "/hello", concurrency=4))
            await asyncio.sleep(0.8)
            final = await engine.stop()
            assert final is not None
        assert final.targets[0].total.requests > 50
        await launcher.stop(rs)
        assert rs.state == STOPPED
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in pids)


async def test_failures_are_clear_and_others_keep_running(tmp_path):
    async with Launcher(tmp_path) as launcher:
        good = await launcher.start(stack("plain"))
        with pytest.raises(LaunchError, match="cannot run /nonexistent/server"):
            await launcher.start(stack("missing-binary"))
        with pytest.raises(LaunchError, match="exited with code 4") as exc:
            await launcher.start(stack("exits-at-once"))
        assert "cannot bind: config broken" in exc.value.log_tail
        with pytest.raises(LaunchError, match=r"not ready within 1.5s \(HTTP 500"):
            await launcher.start(stack("never-ready"))
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            with pytest.raises(LaunchError, match="already in use"):
                await launcher.start(stack("plain:workers=2"), port=taken.getsockname()[1])
        assert good.state == READY and good.dead_process() is None
        assert launcher.running["never-ready"].all_pids() == []


async def test_crash_mid_run_is_reported_with_exit_code_and_log(tmp_path):
    async with Launcher(tmp_path) as launcher:
        other = await launcher.start(stack("plain"))
        rs = await launcher.start(stack("crashing"))
        sessions = rs.sessions
        changed = []
        for _ in range(60):
            changed = launcher.poll()
            if changed:
                break
            await asyncio.sleep(0.1)
        assert [c.name for c in changed] == ["crashing"]
        assert rs.state == CRASHED and rs.exit_code == 3
        assert "exited with code 3" in (rs.error or "")
        assert "forking_server.py" in rs.log_tail()  # the command line heads the log
        assert other.state == READY
    assert pids_in_sessions(sessions) == []


async def test_process_that_leaves_the_group_is_stopped(tmp_path):
    async with Launcher(tmp_path) as launcher:
        rs = await launcher.start(stack("setsid"))
        helper = rs.procs[0]
        await asyncio.sleep(0.5)  # let the helper call setsid and fork its worker
        assert os.getsid(helper.pid) == helper.pid
        pids = rs.all_pids()
        assert len(pids) >= 3
    assert pids_in_sessions(rs.sessions) == []


def test_everything_dies_when_stackrace_is_sigkilled(tmp_path):
    script = textwrap.dedent(
        f"""
        import asyncio
        from stackrace.stacks.catalogue import load_stacks
        from stackrace.stacks.variants import resolve
        from stackrace.stacks.launcher import Launcher
        async def main():
            stacks = load_stacks({str(STACKS_FIXTURE)!r})
            launcher = Launcher({str(tmp_path)!r})
            sessions = []
            for name in ("forking", "setsid", "plain"):
                rs = await launcher.start(resolve(name, stacks))
                sessions += rs.sessions
            await asyncio.sleep(0.5)
            print(" ".join(map(str, sessions)), flush=True)
            await asyncio.sleep(60)
        asyncio.run(main())
        """
    )
    driver = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert driver.stdout is not None
    sessions = [int(s) for s in driver.stdout.readline().split()]
    before = pids_in_sessions(sessions)
    assert len(before) >= 6
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    assert wait_for(lambda: pids_in_sessions(sessions) == [], 6.0), pids_in_sessions(sessions)


async def test_memory_sampling_matches_proc(tmp_path):
    async with Launcher(tmp_path) as launcher:
        rs = await launcher.start(stack("forking"))
        sampler = TreeSampler(rs.root_pids)
        sampler.mark_before()
        await asyncio.sleep(0.3)
        s = sampler.sample()
        proc_rss = 0
        for pid in rs.all_pids():
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    proc_rss += int(line.split()[1]) * 1024
        assert s.processes == 2
        assert abs(s.rss - proc_rss) / proc_rss < 0.05, (s.rss, proc_rss)
        assert 0 < s.uss <= s.pss <= s.rss
        assert sampler.before is not None and sampler.before.rss > 0
        # CPU: load it and see the tree's CPU rise
        async with Engine() as engine:
            await engine.add_target(TargetSpec(id="f", url=rs.url + "/hello", concurrency=8))
            await asyncio.sleep(0.5)
            sampler.sample()
            await asyncio.sleep(0.5)
            busy = sampler.sample()
            await engine.stop()
        # the tree wanted a core: it ran, or waited for one (10.9 % ran and 53 % waited
        # beside a load average of 25: the sampler tells the two apart)
        assert busy.cpu_percent + busy.cpu_wait_percent > 20, busy
        assert busy.cpu_seconds > 0, busy


def test_started_children_do_not_hold_the_terminal(tmp_path):
    async def run() -> int:
        async with Launcher(tmp_path) as launcher:
            rs = await launcher.start(stack("plain"))
            assert rs.main is not None
            return os.getsid(rs.main.pid)

    sid = asyncio.run(run())
    assert sid != os.getsid(0)


async def test_a_stack_being_stopped_is_not_called_crashed(tmp_path):
    """A poll during a stop's grace time (the app's, or a cluster's status refresh) sees
    the server already gone: that is the stop, not a crash (a cluster test once read
    "crashed" for a stack it had just stopped)."""
    async with Launcher(tmp_path) as launcher:
        rs = await launcher.start(stack("slow-to-stop"))
        assert rs.state == READY
        stopping = asyncio.create_task(launcher.stop(rs))
        # the server dies at SIGTERM; the helper holds the stop in its grace time
        assert await until(lambda: rs.main is not None and rs.main.poll() is not None, 5, 0.05)
        assert not stopping.done()
        for _ in range(5):
            assert launcher.poll() == []
            assert rs.state == READY  # until the stop ends
            await asyncio.sleep(0.1)
        await stopping
        assert rs.state == STOPPED and rs.error is None
        assert pids_in_sessions(rs.sessions) == []


async def test_a_port_taken_before_the_stack_binds_it_is_chosen_again(tmp_path):
    """Between the launcher's choice of a free port and the stack's bind, another process
    can take the port (on a busy machine, beside a test lane, uvicorn exited "address
    already in use"). A port the launcher chose is chosen again, once; a port the user
    gave is not (test_failures_are_clear_and_others_keep_running)."""
    marker = tmp_path / "first-port"
    stacks_file = tmp_path / "stacks.toml"
    stacks_file.write_text(
        "[stacks.taken-once]\n"
        'title = "its first port is taken"\nlanguage = "python"\nfamily = "async"\n'
        'command = ["{python}", "{root}/tests/servers/taken_once.py", "{port}", '
        f'"{marker}"]\n'
    )
    taken = resolve("taken-once", load_stacks(stacks_file))
    async with Launcher(tmp_path / "runs") as launcher:
        rs = await launcher.start(taken)
        assert rs.state == READY
        assert marker.exists() and int(marker.read_text()) != rs.port  # a second choice
        await launcher.stop(rs)
