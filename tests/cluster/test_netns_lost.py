"""Hosts lost mid-race, on the multi-host topology: a load host's link goes down (a
partition: its processes live on, silent), then the app host's.

- a load host lost: the race goes on with the other load host (it takes over every
  connection), what the lost engine had in flight counts `abandoned` with the host
  named, the panes and bench's report say which host was lost and when; the counts of
  the load host left equal the server's count from it exactly;
- the app host lost: the run ends with a message naming it, and nothing of the run is
  left running on the other hosts (and, once its link is back, on it either).

Each test heals the topology afterwards (links up, Ray nodes back), so the module's
order does not matter.
"""

from __future__ import annotations

import json
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import psutil
import pytest

from tests.cluster.conftest import NetnsCluster, needs_ray, phase, wait_until
from tests.helpers import ROOT, STACKS_FIXTURE

# Ceilings are generous (a busy 2-core machine starts Ray actors slowly); every wait
# returns as soon as what it waits for holds.
pytestmark = [needs_ray, pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(900)]

DRIVER = Path(__file__).parent / "race_driver.py"
LOST_AFTER = "4"  # seconds: a silent host is lost after this (default 10 s)
OURS = ("stackrace.engine.worker", "ray::EngineHost", "ray::AppHost", "tests/servers/")


class Lines:
    """A process's output lines, read by a thread; `expect` waits for one, bounded."""

    def __init__(self, stream: IO[str]) -> None:
        self.q: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []

        def read() -> None:
            for line in stream:
                self.q.put(line)
            self.q.put(None)

        threading.Thread(target=read, daemon=True).start()

    def expect(self, test: Callable[[str], bool], timeout: float, what: str) -> str:
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            try:
                line = self.q.get(timeout=max(0.01, left))
            except queue.Empty:
                line = ""
            if line is None or left <= 0:
                tail = "".join(self.seen[-20:])
                pytest.fail(f"phase '{what}' timed out after {timeout:g}s; output:\n{tail}")
            if line:
                self.seen.append(line)
                if test(line):
                    return line


def ours_on(cluster: NetnsCluster, role: str) -> dict[int, str]:
    """Processes of a race on a host: engines, their actors, the app host's stacks."""
    from tests.cluster.netns import _ns_pids

    found = {}
    for pid in _ns_pids(cluster.topo[role].netns):
        try:
            cmd = " ".join(psutil.Process(pid).cmdline())
        except psutil.Error:
            continue
        if any(mark in cmd for mark in OURS):
            found[pid] = cmd
    return found


def engines_on(cluster: NetnsCluster, role: str) -> dict[int, str]:
    return {pid: cmd for pid, cmd in ours_on(cluster, role).items() if "engine.worker" in cmd}


def stacks_on(cluster: NetnsCluster, role: str) -> dict[int, str]:
    return {pid: cmd for pid, cmd in ours_on(cluster, role).items() if "tests/servers/" in cmd}


def peers_connected(cluster: NetnsCluster, role: str) -> set[str]:
    """The addresses holding established connections to the stacks on a host."""
    stacks = stacks_on(cluster, role)
    ports = {port for _, port, pid in cluster.topo.listeners(role) if pid in stacks}
    out = cluster.topo.run(
        role, ["ss", "-Htn", "state", "established"], capture_output=True, text=True
    ).stdout
    peers = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 4 and int(fields[2].rpartition(":")[2]) in ports:
            peers.add(fields[3].rpartition(":")[0])
    return peers


def none_of(
    found: Callable[[NetnsCluster, str], dict[int, str]], cluster: NetnsCluster, role: str
) -> Callable[[], bool]:
    """A wait's test: nothing `found` on `role`'s host (its processes, by pid)."""
    return lambda: not found(cluster, role)


def event(name: str) -> Callable[[str], bool]:
    return lambda line: line.startswith("{") and json.loads(line)["event"] in (name, "timeout")


def parsed(line: str, name: str) -> dict:
    e = json.loads(line)
    assert e["event"] == name, e  # a timeout inside the driver names its phase
    return e


def test_hosts_lost_mid_race_the_app_says_so(netns_cluster: NetnsCluster):
    """The app's session: load1's link goes down while both load hosts load two stacks;
    later the app host's."""
    c = netns_cluster
    lost_ip = c.addr("load1")
    driver = c.topo.popen(
        "head",
        [
            sys.executable,
            str(DRIVER),
            c.address,
            str(STACKS_FIXTURE),
            "-c",
            "8",
            "--workload",
            "io",
            "--lost-after",
            LOST_AFTER,
            "--cut",
            "load",
            "--cut",
            "app",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=c.env,
        cwd=ROOT,
    )
    assert driver.stdin is not None and driver.stdout is not None
    out = Lines(driver.stdout)
    try:
        parsed(out.expect(event("loading"), 400, "the race loads from both hosts"), "loading")
        out.expect(event("cut"), 120, "the driver ready for the cut")
        with phase("load1 cut off"):
            c.topo.cut("load1")
            driver.stdin.write("go\n")
            driver.stdin.flush()
        lost = parsed(
            out.expect(event("load-lost"), 150, "the panes say load1 was lost"), "load-lost"
        )
        # still cut off, unreachable for Ray: the engine there stops on its own (no word
        # from the driver), so that no load nobody counts reaches the stacks when the
        # partition heals
        wait_until(lambda: not engines_on(c, "load1"), 60, "the cut-off load1's engine stops")
        c.topo.mend("load1")
        driver.stdin.write("go\n")
        driver.stdin.flush()
        drained = parsed(out.expect(event("drained"), 300, "the race drained"), "drained")
        out.expect(event("cut"), 300, "the load flows again, for the app host's cut")
        with phase("the app host cut off"):
            c.topo.cut("app")
            driver.stdin.write("go\n")
            driver.stdin.flush()
        ended = parsed(out.expect(event("app-lost"), 150, "the race ends"), "app-lost")
        # the race ended: the engines on the load hosts stop, and the cut-off app host
        # stops its stacks on its own
        for role in ("load1", "load2"):
            wait_until(none_of(engines_on, c, role), 120, f"no engine left on {role}")
        wait_until(lambda: not stacks_on(c, "app"), 60, "the cut-off app host stops its stacks")
        out.expect(event("done"), 120, "the driver done")
        assert driver.wait(60) == 0
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        c.topo.mend("load1")
        c.topo.mend("app")
    assert ended["ended"].startswith(f"the app host {c.addr('app')} was lost at "), ended
    assert ended["ended"].endswith("the race ended"), ended
    assert all(p["state"] == "crashed" for p in ended["panes"].values()), ended
    for name, line in lost["annotations"].items():
        assert f"load host {lost_ip} lost at " in line, (name, line)
        assert "counted abandoned" in line
        when = line.split(" lost at ")[1]
        assert re.match(r"\d\d:\d\d:\d\d \(\d+\.\ds into the load; no report for", when), line
    assert any("goes on with" in e for e in lost["errors"]), lost["errors"]
    abandoned: dict[str, int] = {}
    for per_target in drained["abandoned"]:
        for name, n in per_target.items():
            abandoned[name] = abandoned.get(name, 0) + n
    for name, st in drained["stacks"].items():
        by_peer = {ip: n for ip, n in st["served"]["by_peer"].items()}
        gone, left = st["by_host"][lost_ip], st["by_host"][c.addr("load2")]
        # the load host left: every request it sent was answered, and the server counted
        # exactly those from it
        assert left["failed"] == left["waiting"] == 0, (name, left)
        assert left["requests"] == left["sent"] == by_peer[c.addr("load2")], (name, st)
        # the lost one: its requests in flight at its last report count abandoned (4
        # connections, each waiting on a 10 ms /io), its answered ones the server served
        assert abandoned[name] >= 1, (name, abandoned)
        assert gone["failed"] == abandoned[name], (name, gone, abandoned)
        assert gone["waiting"] == 0
        assert gone["requests"] <= by_peer[lost_ip], (name, gone, by_peer)
    # the lost engine (its actor killed once its host was reachable again) is gone, and
    # nothing of the race is left on either load host
    for role in ("load1", "load2", "app"):
        wait_until(none_of(ours_on, c, role), 180, f"nothing of the race left on {role}")
    c.heal("load1")
    c.heal("app")


def test_bench_reports_a_lost_load_host_and_ends_without_its_app_host(
    netns_cluster: NetnsCluster, tmp_path: Path
):
    c = netns_cluster
    out_json = tmp_path / "run.json"
    driver = c.driver(
        "--stacks-file",
        str(STACKS_FIXTURE),
        "bench",
        "--cluster",
        c.address,
        "--cluster-timeout",
        "120s",
        "--cluster-lost-after",
        f"{LOST_AFTER}s",
        "--stacks",
        "plain",
        "--workload",
        "io",
        "--concurrency",
        "8",
        "--duration",
        "60s",
        "--warmup",
        "0s",
        "--json",
        str(out_json),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert driver.stderr is not None
    err = Lines(driver.stderr)
    try:
        err.expect(lambda line: "plain: starting" in line, 300, "bench starts the stack")
        # the load flows from both load hosts: the stack holds connections from each
        wait_until(
            lambda: peers_connected(c, "app") >= {c.addr("load1"), c.addr("load2")},
            300,
            "the stack loaded from both load hosts",
        )
        time.sleep(1.0)
        with phase("load1 cut off during the level"):
            c.topo.cut("load1")
        line = err.expect(lambda s: "lost at" in s, 120, "bench says load1 was lost")
        assert f"! load host {c.addr('load1')} lost at " in line, line
        assert "the run goes on" in line
        c.topo.mend("load1")
        time.sleep(2.0)  # the level goes on with load2
        with phase("the app host cut off"):
            c.topo.cut("app")
        ended = err.expect(lambda s: "the app host" in s, 120, "bench says the app host was lost")
        with phase("bench ends"):
            rc = driver.wait(120)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        c.topo.mend("load1")
    assert rc == 1, "".join(err.seen[-20:])
    assert f"stackrace bench: the app host {c.addr('app')} was lost at " in ended, ended
    assert "the run ended" in ended
    # lost after ~4 s of silence (lost_after), not after Ray's own minute
    found = re.search(r"no answer for ([\d.]+)s", ended)
    assert found is not None, ended
    silent = float(found[1])
    assert silent < 20, ended
    run = json.loads(out_json.read_text())
    assert any(f"load host {c.addr('load1')} lost at" in n for n in run["notes"]), run["notes"]
    # nothing of the run left on the load hosts (load2 at once; load1 is back on the
    # wire) while the app host is still cut off
    for role in ("load1", "load2"):
        wait_until(none_of(ours_on, c, role), 120, f"nothing of the run left on {role}")
    # the app host, still cut off (Ray cannot reach it), stops its stacks on its own: no
    # word from the driver for longer than lost_after
    wait_until(lambda: not stacks_on(c, "app"), 60, "the cut-off app host stops its stacks")
    # once it is back, its actor goes too (Ray kills the dead driver's actors)
    c.topo.mend("app")
    wait_until(lambda: not ours_on(c, "app"), 180, "nothing of the run left on the app host")
    c.heal("app")
    c.heal("load1")
