"""Ray clusters for the cluster tests, shared by the session.

- `ray_cluster`: three nodes on this machine's loopback (ray.cluster_utils): the
  one-machine path (stacks stay on 127.0.0.1). Skipped only when Ray is missing.
- `netns_cluster`: four hosts, each a network namespace with its own address on a bridge
  (tests/cluster/netns.py): the multi-host path (stacks on the app host's address, load
  across the bridge). Skipped, with the reason, where namespaces cannot be made.

`phase()` and `wait_until()` name what a test waited for when a wait times out."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.cluster.netns import Topology, sweep, unavailable
from tests.helpers import CLI, ROOT

T = TypeVar("T")
_RAY_LOCAL_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"

HERE = Path(__file__).parent
HAVE_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(
    not HAVE_RAY, reason="Ray is not installed: pip install -e '.[cluster]'"
)


@dataclass
class LocalCluster:
    address: str
    nodes: dict[str, str]  # role -> node id
    env: dict[str, str]  # for drivers started as processes


# package scope, both clusters: torn down after the last test of tests/cluster. As
# session fixtures they lived until the end of ./dev test's beside lane, ~12 minutes of
# 34 idle Ray processes using ~0.16 of a core on a 2-core machine (measured with ps
# during a run): the walkthrough, TUI and e2e tests after them paid for it.
@pytest.fixture(scope="package")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    if not HAVE_RAY:
        pytest.skip("Ray is not installed: pip install -e '.[cluster]'")
    from stackrace.cluster.run import local_cluster_env

    runs = tmp_path_factory.mktemp("runs")
    # the nodes' workers inherit this: the app host's stacks keep their logs here
    # RAY_worker_niceness: Ray's workers (our actors, their engines and stacks) run at
    # niceness 15 by default, and on a busy machine an actor then takes tens of seconds
    # to start
    env = {**local_cluster_env(), "STACKRACE_RUNS_DIR": str(runs), "RAY_worker_niceness": "0"}
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "ray_cluster.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        pytest.fail("the local Ray cluster did not start")
    info = json.loads(line)
    try:
        yield LocalCluster(info["address"], info["nodes"], env)
    finally:
        proc.stdin.close()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# --- phases: a timed-out wait names the test and what it waited for ------------------

_PHASE: dict[str, str] = {"now": ""}
_LIVE: dict[str, NetnsCluster] = {}  # the session's topology, for failure reports


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Name what the test does now: a failure (a wait that timed out, pytest-timeout's
    kill) reports it beside the test's name."""
    before = _PHASE["now"]
    _PHASE["now"] = name
    try:
        yield
    finally:
        _PHASE["now"] = before


def wait_until(predicate: Callable[[], T | None], timeout: float, what: str) -> T:
    """predicate()'s first truthy value; fails naming `what` when none comes in time."""
    end = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < end:
        last = predicate()
        if last:
            return last
        time.sleep(0.2)
    pytest.fail(f"phase '{what}' timed out after {timeout:g}s (last: {last!r})")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    if report.failed and _PHASE["now"]:
        report.sections.append(("phase", f"{item.nodeid} failed in phase: {_PHASE['now']}"))
        report.longrepr = f"[phase: {_PHASE['now']}]\n{report.longrepr}"
    cluster = _LIVE.get("netns")
    uses_it = isinstance(item, pytest.Function) and "netns_cluster" in item.fixturenames
    if report.failed and cluster is not None and uses_it:
        # what Ray said on each host (CI keeps no topology to look at afterwards)
        for role, tail in cluster.ray_log_tails().items():
            report.sections.append((f"ray on {role}", tail))
    if report.when == "teardown":
        _PHASE["now"] = ""


# --- the multi-host topology: namespaces on a bridge, a Ray node in each -------------


_RAY_NOISE = ("[state-dump]", "\t")


def _newest(logs: Path, pattern: str, n: int) -> list[Path]:
    return sorted(logs.glob(pattern), key=lambda p: p.stat().st_mtime)[-n:]


@dataclass
class NetnsCluster:
    """tests/cluster/netns.py's topology with Ray up: head, load1, load2, app (and an
    `outside` host that is no node). Drivers run on the head host, as a user's would."""

    topo: Topology
    env: dict[str, str]  # for drivers (and what the nodes were started with)

    @property
    def address(self) -> str:
        return self.topo.ray_address()

    def addr(self, role: str) -> str:
        return self.topo[role].address

    def stackrace(self, *args: str, timeout: float, what: str) -> subprocess.CompletedProcess[str]:
        """`stackrace ARGS` on the head host, to the end; a timeout names `what`."""
        with phase(what):
            try:
                return self.topo.run(
                    "head",
                    [*CLI, *args],
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                    env=self.env,
                    cwd=ROOT,
                )
            except subprocess.TimeoutExpired as exc:
                pytest.fail(
                    f"phase '{what}' timed out after {timeout:g}s; stderr so far:\n"
                    f"{(exc.stderr or b'')[-3000:]!r}"
                )

    def driver(self, *args: str, **kw: Any) -> subprocess.Popen[str]:
        """`stackrace ARGS` on the head host, running."""
        return self.topo.popen("head", [*CLI, *args], env=self.env, cwd=ROOT, text=True, **kw)

    def http_json(self, role: str, url: str) -> dict:
        """GET url from host `role` (the test's own process, its thread in that host)."""

        def get() -> dict:
            with urllib.request.urlopen(url, timeout=10) as r:
                return json.loads(r.read())

        return self.topo.call(role, get)

    def ray_log_tails(self, lines: int = 40) -> dict[str, str]:
        """The last lines of each host's raylet log, and of its newest worker logs."""
        out = {}
        for role, host in self.topo.hosts.items():
            logs = host.ray_temp / "session_latest" / "logs"
            if not logs.is_dir():
                continue
            parts = []

            # raylet, the newest workers' core logs and their stderr (a worker that
            # crashed at start leaves only the latter)
            files = [
                logs / "raylet.out",
                *_newest(logs, "python-core-worker-*.log", 2),
                *[f for f in _newest(logs, "worker-*.err", 3) if f.stat().st_size],
            ]
            for f in files:
                with contextlib.suppress(OSError):
                    text = f.read_text(errors="replace").splitlines()
                    # Ray's periodic state dumps and memory notes drown what happened
                    said = [ln for ln in text if not ln.startswith(_RAY_NOISE)]
                    tail = [ln for ln in said if "[state-dump]" not in ln][-lines:]
                    parts.append(f"--- {f.name}\n" + "\n".join(tail))
            out[role] = "\n".join(parts)
        return out

    def ray_nodes(self) -> list[dict]:
        """Ray's live nodes, as a driver on the head host sees them."""
        return self.topo.ray_nodes(self.env)

    def heal(self, role: str, timeout: float = 120.0) -> None:
        """After a test cut `role` off: its link up, and its Ray node able to host an
        actor again — else started anew — so the next test finds the topology whole.

        Seen under load: after a cut of ~10 s Ray listed the node alive at once, yet the
        next run's engine actor there was reported dead while its worker ran (likely the
        connections the cut stalled, still backing off). A probe actor tells; the node
        list does not."""
        with phase(f"healing {role}"):
            self.topo.mend(role)
            end = time.monotonic() + 60
            while time.monotonic() < end:
                if self.topo.hosts_actors(role, self.env):
                    return
                time.sleep(2.0)
            self.topo.restart_ray(role, env=self.env, timeout=timeout)
            wait_until(
                lambda: self.topo.hosts_actors(role, self.env),
                timeout,
                f"the Ray node on {role} back, hosting actors",
            )


@pytest.fixture(scope="package")
def netns_cluster() -> Iterator[NetnsCluster]:
    """One topology for every multi-host test of the package (a Ray cluster of four
    namespaces takes ~20 s to start); removed at the end, checked gone."""
    if not HAVE_RAY:
        pytest.skip("Ray is not installed: pip install -e '.[cluster]'")
    why = unavailable()
    if why:
        pytest.skip(f"the multi-host tests need network namespaces: {why}")
    sweep()  # what killed runs left behind (their owner's pid is gone)
    topo = Topology()
    try:
        with phase("the topology comes up"):
            topo.up()
            env = {k: v for k, v in os.environ.items() if k != _RAY_LOCAL_ONLY}
            # the app host's stacks log, and its MariaDB lives, in the run's own temp dir
            env["STACKRACE_RUNS_DIR"] = str(topo.temp / "runs")
            env["STACKRACE_DB_DIR"] = str(topo.temp / "db")
            # Ray's GCS declares a node dead after 5 failed health checks, ~11 s each
            # while a link is down — and the connections a cut stalled back off after it
            # is mended, so checks go on failing: measured, a 40 s cut and the node was
            # declared dead 14 s after its link was back (its raylet then exits). The
            # lost-host tests cut a host for ~10–20 s and need its node afterwards;
            # 10 failures give a cut ~2 minutes (stackrace itself never waits for Ray's
            # verdict: it has its own, lost_after). A killed raylet (refused at once)
            # is still declared dead within ~30 s.
            env["RAY_health_check_failure_threshold"] = "10"
            topo.start_ray(env=env)
        cluster = _LIVE["netns"] = NetnsCluster(topo, env)
        yield cluster
    finally:
        _LIVE.pop("netns", None)
        topo.down()
        left = topo.leftovers()
        assert not left, f"the topology left: {left}"
