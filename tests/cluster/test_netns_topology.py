"""The multi-host topology itself (tests/cluster/netns.py) leaves nothing behind: not when
it is taken down, not when its owner is SIGKILLed (the reaper), not when a run died
before the reaper existed (the sweep) — and a sweep never touches a live run's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster import netns
from tests.cluster.conftest import wait_until
from tests.conftest_stacks import live
from tests.helpers import ROOT

pytestmark = pytest.mark.cluster

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def namespaces_possible() -> None:
    why = netns.unavailable()
    if why:
        pytest.skip(f"the multi-host tests need network namespaces: {why}")


def test_unavailable_says_why_without_root_or_ip(monkeypatch: pytest.MonkeyPatch):
    """The fixture skips with this reason (it never fails for want of namespaces)."""
    with monkeypatch.context() as m:
        m.setattr(netns.os, "geteuid", lambda: 1000)
        assert netns.unavailable() == "network namespaces need root"
    with monkeypatch.context() as m:
        m.setattr(netns.os, "geteuid", lambda: 0)
        m.setenv("PATH", "/nonexistent")
        assert "iproute2" in (netns.unavailable() or "")


OWNER = """
import sys, time
sys.path.insert(0, {root!r})
from tests.cluster.netns import Topology
t = Topology(roles=("load1", "app")).up()
# a daemon in each host (as Ray's are: a new session, its parent gone)
for role in ("load1", "app"):
    t.run(role, ["sh", "-c", "setsid sleep 600 >/dev/null 2>&1 &"], check=True)
t.slow("load1", 5, 0)  # the delay line: a process and iptables rules in load1
print(t.prefix, flush=True)
time.sleep(600)
"""


def test_a_killed_owner_leaves_nothing(namespaces_possible: None):
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER.format(root=str(ROOT))],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert owner.stdout is not None
    prefix = owner.stdout.readline().strip()
    try:
        assert prefix.startswith(f"sr-{owner.pid}-"), prefix
        names = netns.run_namespaces(prefix)
        assert len(names) == 3  # the hub, load1, app
        pids = [pid for ns in names for pid in netns._ns_pids(ns)]
        assert len(pids) >= 3  # two sleeps and the delay line
    finally:
        owner.kill()  # SIGKILL: no finally of its runs
        owner.wait()
    wait_until(
        lambda: not netns.run_namespaces(prefix) and not (netns.TMP / prefix).exists(),
        30,
        "the reaper removes the killed owner's run",
    )
    wait_until(lambda: not live(pids), 10, "the run's processes gone")
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert f"sr{owner.pid}-" not in links


def test_sweep_removes_dead_runs_only(namespaces_possible: None):
    dead = subprocess.Popen(["true"])
    dead.wait()
    # a run whose owner is gone, without a reaper (killed before it started one)
    prefix = f"sr-{dead.pid}-7"
    mine = netns.Topology(roles=("app",))
    try:
        for role in ("net", "app"):
            subprocess.run(["ip", "netns", "add", f"{prefix}-{role}"], check=True)
        subprocess.run(
            ["ip", "netns", "exec", f"{prefix}-app", "sh", "-c", "setsid sleep 600 &"],
            check=True,
        )
        (netns.TMP / prefix).mkdir()
        mine.up()  # a live run: this process owns it
        assert prefix in netns.dead_runs()
        assert mine.prefix not in netns.dead_runs()
        swept = netns.sweep()
        assert prefix in swept and mine.prefix not in swept
        assert not netns.run_namespaces(prefix) and not (netns.TMP / prefix).exists()
        assert netns.run_namespaces(mine.prefix)  # untouched
    finally:
        netns.remove_run(prefix)
        mine.down()
    assert mine.leftovers() == {}
