"""The launcher's guarantees with real stacks: SIGKILL of stackrace leaves nothing, the
sampler agrees with /proc over a whole php-fpm + nginx tree, pinning, memory caps,
state callbacks and cancelled starts."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from stackrace.base.slug import slug
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.launcher import Launcher
from stackrace.stacks.running import CRASHED, FAILED, READY, STOPPED, RunningStack
from stackrace.stacks.sampler import TreeSampler
from stackrace.stacks.variants import resolve
from stackrace.supervise.procs import pids_in_sessions
from tests.conftest_stacks import (
    live,
    port_is_free,
    processes_mentioning,
    real_stack,
)
from tests.helpers import ROOT, STACKS_FIXTURE, until, wait_for


@pytest.mark.slow
def test_sigkill_of_stackrace_leaves_no_process_of_real_stacks(tmp_path: Path) -> None:
    # php-fpm calls setsid() itself; gunicorn and uWSGI fork workers that PR_SET_PDEATHSIG
    # does not reach: the watchdog must get them all
    names = ["php-fpm-nginx:workers=2", "gunicorn-sync:workers=3", "uwsgi:workers=2"]
    for n in names:
        real_stack(n)
    script = textwrap.dedent(
        f"""
        import asyncio, json
        from stackrace.stacks.catalogue import load_stacks
        from stackrace.stacks.variants import resolve
        from stackrace.stacks.launcher import Launcher
        async def main():
            stacks = load_stacks()
            launcher = Launcher({str(tmp_path)!r})
            out = {{"pids": [], "ports": []}}
            for name in {names!r}:
                rs = await launcher.start(resolve(name, stacks))
                out["ports"].append(rs.port)
            await asyncio.sleep(0.3)  # let every worker fork
            for rs in launcher.running.values():
                out["pids"] += rs.all_pids()
            out["watchdog"] = launcher._watchdog.proc.pid
            print(json.dumps(out), flush=True)
            await asyncio.sleep(60)
        asyncio.run(main())
        """
    )
    driver = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=ROOT
    )
    assert driver.stdout is not None
    try:
        info = json.loads(driver.stdout.readline())
    finally:
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
    pids, ports = info["pids"], info["ports"]
    # php-fpm master + 2 children, nginx master + worker, gunicorn 1 + 3, uWSGI 1 + 2
    assert len(pids) >= 12, pids
    assert wait_for(lambda: live(pids) == [], 6.0), f"still running: {live(pids)}"
    assert wait_for(lambda: live([info["watchdog"]]) == [], 10.0), "the watchdog stayed"
    assert processes_mentioning(str(tmp_path)) == []
    assert all(port_is_free(p) for p in ports)


def _proc_memory(pids: list[int]) -> dict[str, int]:
    """RSS, PSS and USS summed over pids, read from /proc directly (bytes)."""
    total = {"rss": 0, "pss": 0, "uss": 0}
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total["rss"] += int(line.split()[1]) * 1024
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key == "Pss":
                total["pss"] += int(rest.split()[0]) * 1024
            elif key in ("Private_Clean", "Private_Dirty", "Private_Hugetlb"):
                total["uss"] += int(rest.split()[0]) * 1024
    return total


@pytest.mark.slow
async def test_sampler_matches_proc_over_a_php_fpm_nginx_tree(tmp_path: Path) -> None:
    async with Launcher(tmp_path) as launcher:
        rs = await launcher.start(real_stack("php-fpm-nginx:workers=3,nginx_workers=2"))
        await asyncio.sleep(0.3)
        sampler = TreeSampler(rs.root_pids)
        before = sampler.mark_before()
        pids = rs.all_pids()
        proc = _proc_memory(pids)
        # php-fpm (its own session) + 3 children, nginx + 2 workers: all in the tree
        assert before.processes == len(pids) == 7, (before, pids)
        for key in ("rss", "pss", "uss"):
            ours = getattr(before, key)
            assert abs(ours - proc[key]) <= 0.03 * proc[key], (key, ours, proc[key])
        assert before.uss < before.pss < before.rss
        assert before.threads >= before.processes
        after = sampler.mark_after()
        assert sampler.before is before and sampler.after is after
        # tmp_path is too long for a unix socket under it: the run dir is a short one
        link = tmp_path / slug(rs.name)
        assert link.is_symlink() and link.resolve() == rs.run_dir
        short = rs.run_dir
    # after close() the log is back under run_root and the short dir is gone
    assert not short.exists() and not link.is_symlink()
    assert rs.log_path == link / "log.txt" and "php-fpm" in rs.log_path.read_text()


async def test_pinning_and_memory_cap(tmp_path: Path) -> None:
    toml = tmp_path / "stacks.toml"
    toml.write_text(
        STACKS_FIXTURE.read_text()
        + textwrap.dedent(
            """
            [stacks.pinned]
            title = "pinned to CPU 0, capped at 64M"
            language = "python"
            family = "prefork"
            command = ["{python}", "{root}/tests/servers/forking_server.py", "{port}"]
            cpus = [0]
            memory_max = "64M"
            """
        )
    )
    async with Launcher(tmp_path / "run") as launcher:
        rs = await launcher.start(resolve("pinned", load_stacks(toml)))
        pids = rs.all_pids()
        assert len(pids) == 2  # the forked worker inherits the affinity
        assert all(os.sched_getaffinity(p) == {0} for p in pids)
        from stackrace.stacks import cgroup

        why = cgroup.unavailable_reason()
        if why is None and rs.cgroup_dir is not None:
            assert rs.memory_cap == "64M"
            assert (rs.cgroup_dir / "memory.max").read_text().strip() == str(64 << 20)
            members = {int(x) for x in (rs.cgroup_dir / "cgroup.procs").read_text().split()}
            assert set(pids) <= members
        else:
            # not silently ignored: the stack says why there is no cap
            assert rs.memory_cap is not None
            assert rs.memory_cap.startswith("memory cap unavailable: "), rs.memory_cap
            assert len(rs.memory_cap) > len("memory cap unavailable: ")


async def test_state_callbacks_and_cancelled_start(tmp_path: Path) -> None:
    stacks = load_stacks(STACKS_FIXTURE)
    seen: list[tuple[str, str]] = []
    async with Launcher(tmp_path, on_change=lambda rs: seen.append((rs.name, rs.state))) as la:
        crashing = await la.start(resolve("crashing", stacks))
        with pytest.raises(Exception, match="exited with code 4"):
            await la.start(resolve("exits-at-once", stacks))
        assert wait_for(lambda: bool(la.poll()) or crashing.state == CRASHED, 5.0)

        # a start given up half-way (the app quit) stops what it had started; the stack's
        # start timeout is 120 s: a fixed 0.6 s sleep against never-ready's 1.5 s lost on
        # a loaded box (the start had failed by the time it was cancelled)
        task = asyncio.ensure_future(la.start(resolve("starting-forever", stacks)))
        never = await _starting(la, "starting-forever")
        sessions = never.sessions
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert pids_in_sessions(sessions) == []
        assert never.state == STOPPED

        plain = await la.start(resolve("plain", stacks))
    # each stack's changes in order (crashing dies 1.5 s after it is ready: on a loaded
    # box that may come before exits-at-once has failed, and that order is no claim)
    changes: dict[str, list[str]] = {}
    for name, state in seen:
        changes.setdefault(name, []).append(state)
    assert changes == {
        "crashing": [READY, CRASHED],
        "exits-at-once": [FAILED],
        "starting-forever": [STOPPED],
        "plain": [READY, STOPPED],
    }
    assert crashing.exit_code == 3 and plain.state == STOPPED


@pytest.mark.slow
async def test_sampler_follows_a_respawned_worker(tmp_path: Path) -> None:
    async with Launcher(tmp_path) as launcher:
        rs = await launcher.start(real_stack("gunicorn-sync:workers=2"))
        sampler = TreeSampler(rs.root_pids)
        assert wait_for(lambda: sampler.mark_before().processes == 3, 5.0)
        master = rs.root_pids[0]
        worker = next(p for p in rs.all_pids() if p != master)
        os.kill(worker, signal.SIGKILL)  # gunicorn forks a new one
        assert wait_for(
            lambda: sampler.sample().processes == 3 and worker not in sampler._procs, 5.0
        )
        assert set(sampler._procs) == set(rs.all_pids())


async def test_stop_all_while_a_stack_starts(tmp_path: Path) -> None:
    stacks = load_stacks(STACKS_FIXTURE)
    async with Launcher(tmp_path) as launcher:
        task = asyncio.ensure_future(launcher.start(resolve("starting-forever", stacks)))
        rs = await _starting(launcher, "starting-forever")
        sessions = rs.sessions
        await launcher.stop_all()
        with pytest.raises(Exception, match="stopped while it was starting"):
            await task
        assert rs.state == STOPPED
        assert pids_in_sessions(sessions) == []


async def _starting(launcher: Launcher, name: str) -> RunningStack:
    """The stack once its processes run (it is then waiting to be ready), bounded."""

    def running() -> bool:
        rs = launcher.running.get(name)
        return rs is not None and bool(pids_in_sessions(rs.sessions))

    assert await until(running, 30, step=0.05), f"{name}: no process started within 30 s"
    return launcher.running[name]
