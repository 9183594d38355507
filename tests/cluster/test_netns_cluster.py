"""The cluster on separate hosts: four network namespaces on a bridge (tests/cluster/
netns.py), a Ray node in each — head, two load hosts, the app host — and a fifth host on
the wire that is no node (`outside`).

What only separate hosts show: the stacks listen on the app host's own address (not
127.0.0.1), the load hosts' engines reach them across the bridge, and the counts merged on
the driver equal the servers' own — per load host, since a server counts its requests by
client address. The app host's veth counters show the traffic crossed it.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.cluster.conftest import NetnsCluster, needs_ray, phase, wait_until
from tests.helpers import ROOT, STACKS_FIXTURE, TESTSERVER

# Ceilings are generous (a busy 2-core machine starts Ray actors slowly); every wait
# returns as soon as what it waits for holds.
pytestmark = [needs_ray, pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(900)]
ROLE_TIMEOUT = ("--cluster-timeout", "120s")

DRIVER = Path(__file__).parent / "race_driver.py"
LOADS = ("load1", "load2")


def start_server(cluster: NetnsCluster, port: int = 8080) -> subprocess.Popen[bytes]:
    """The test server on the app host, listening on the app host's address."""
    proc = cluster.topo.popen(
        "app",
        [sys.executable, str(TESTSERVER), str(port), "--host", cluster.addr("app")],
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"ready"
    return proc


def peers(cluster: NetnsCluster, stats: dict) -> dict[str, int]:
    """The server's requests by which host sent them, named by role."""
    names = {cluster.addr(r): r for r in cluster.topo.hosts}
    return {names.get(ip, ip): n for ip, n in stats["by_peer"].items()}


def test_the_hosts_are_ray_nodes_with_their_roles(netns_cluster: NetnsCluster):
    nodes = {n["ip"]: n["labels"].get("stackrace-role") for n in netns_cluster.ray_nodes()}
    c = netns_cluster
    assert nodes == {
        c.addr("head"): "head",
        c.addr("load1"): "load",
        c.addr("load2"): "load",
        c.addr("app"): "app",
    }


def test_load_across_hosts_counts_match_the_server(netns_cluster: NetnsCluster):
    c = netns_cluster
    server = start_server(c)
    url = f"http://{c.addr('app')}:8080"
    try:
        before = c.topo.counters("app")
        out = c.stackrace(
            "load",
            url + "/hello",
            "-c",
            "8",
            "-d",
            "2s",
            "--json",
            "--cluster",
            c.address,
            *ROLE_TIMEOUT,
            timeout=400,
            what="stackrace load --cluster across hosts",
        )
        assert out.returncode == 0, out.stderr
        after = c.topo.counters("app")
        result = json.loads(out.stdout)
        stats = c.http_json("head", url + "/_stats")
    finally:
        server.kill()
    total = result["total"]
    assert result["procs"] == 2  # one engine process on each load host
    assert total["requests"] > 20 and total["failures"] == {}
    by_peer = peers(c, stats)
    # every request came from a load host, across the bridge, and both loaded
    assert set(by_peer) == set(LOADS), by_peer
    # stopped in flight: the server saw exactly what was sent, request by request
    assert total["sent"] == stats["by_path"]["/hello"] == sum(by_peer.values())
    # per load host, the engine's share equals what the server counted from that host
    hosts = result["hosts"]
    assert set(hosts) == {c.addr(r) for r in LOADS}
    for role in LOADS:
        assert hosts[c.addr(role)]["sent"] == by_peer[role], (role, hosts, by_peer)
    # and it crossed the app host's veth: a packet at least per request in, every
    # response byte the engines read out
    assert after.rx_packets - before.rx_packets >= total["sent"]
    assert after.tx_bytes - before.tx_bytes >= total["bytes"]


def test_app_session_across_hosts_counts_match_the_servers(netns_cluster: NetnsCluster):
    """The app's session (race core, panes) with engines on both load hosts and the
    stacks started by the app host on its own address; after a drain, each stack's
    merged figures equal its server's count, and each load host's share equals what the
    server counted from that host."""
    c = netns_cluster
    before = c.topo.counters("app")
    with phase("the app's session across hosts"):
        out = c.topo.run(
            "head",
            [sys.executable, str(DRIVER), c.address, str(STACKS_FIXTURE), "-c", "8"],
            capture_output=True,
            text=True,
            timeout=600,
            env=c.env,
            cwd=ROOT,
        )
    events = {e["event"]: e for e in map(json.loads, out.stdout.splitlines())}
    assert out.returncode == 0 and "done" in events, (events, out.stderr[-3000:])
    after = c.topo.counters("app")
    loading = events["loading"]
    assert loading["hosts"] == sorted(c.addr(r) for r in LOADS)
    assert loading["bind"] == c.addr("app")  # not loopback: other hosts reach it
    for url in loading["urls"].values():
        assert url.startswith(f"http://{c.addr('app')}:")
    sent = 0
    for name, st in events["drained"]["stacks"].items():
        by_peer = peers(c, st["served"])
        # the app host's own readiness probes aside, every request came from a load host
        assert set(by_peer) - {"app"} == set(LOADS), (name, by_peer)
        # since the start (the session's totals restart with each level): per load
        # host, what its engine process sent, and had answered, is what the server
        # counted from that host — nothing lost or counted twice crossing Ray
        for role in LOADS:
            share = st["by_host"][c.addr(role)]
            assert share["failed"] == share["waiting"] == 0, (name, role, share)
            assert share["requests"] > 10, (name, role, share)
            assert share["requests"] == share["sent"] == by_peer[role], (name, role, st)
            sent += share["sent"]
        assert st["total"]["waiting"] == 0 and st["total"]["failures"] == {}
        assert st["rss"] > 0  # sampled on the app host
    assert after.rx_packets - before.rx_packets >= sent


def test_bench_across_hosts(netns_cluster: NetnsCluster, tmp_path: Path):
    c = netns_cluster
    out_json = tmp_path / "run.json"
    runs = Path(c.env["STACKRACE_RUNS_DIR"])
    started = time.time()
    before = c.topo.counters("app")
    out = c.stackrace(
        "--stacks-file",
        str(STACKS_FIXTURE),
        "bench",
        "--cluster",
        c.address,
        *ROLE_TIMEOUT,
        "--stacks",
        "plain,forking",
        "--concurrency",
        "4",
        "--duration",
        "1s",
        "--warmup",
        "0s",
        "--json",
        str(out_json),
        timeout=600,
        what="stackrace bench --cluster across hosts",
    )
    assert out.returncode == 0, out.stderr
    after = c.topo.counters("app")
    loads = ", ".join(c.addr(r) for r in LOADS)
    app = c.addr("app")
    assert f"on {loads}; stacks on {app}, listening on {app}" in out.stderr
    run = json.loads(out_json.read_text())
    window_requests = 0
    for st in run["stacks"]:
        assert not st.get("error"), st
        (level,) = st["levels"]
        w = level["window"]
        # (a failure says what the run said: its load hosts once went silent ~50 s)
        said = (st["name"], w, run.get("notes"), out.stderr[-3000:])
        assert w["requests"] > 10 and w["failures"] == {}, said
        assert w["sent"] == w["requests"] + w["waiting"]
        assert level["memory_before"]["rss"] > 0  # sampled on the app host
        window_requests += w["requests"]
    # the plain stack wrote its counts when bench stopped it
    (stats_file,) = [p for p in runs.rglob("stats.json") if p.stat().st_mtime >= started]
    by_peer = peers(c, json.loads(stats_file.read_text()))
    assert set(by_peer) - {"app"} == set(LOADS), by_peer
    plain = next(st for st in run["stacks"] if st["name"] == "plain")
    assert by_peer["load1"] + by_peer["load2"] >= plain["levels"][0]["window"]["requests"]
    assert after.rx_packets - before.rx_packets >= window_requests


class Listener:
    """A TCP listener on a host that counts the connections it accepts."""

    def __init__(self, cluster: NetnsCluster, role: str, port: int = 8080) -> None:
        self.accepted = 0

        def make() -> socket.socket:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((cluster.addr(role), port))
            s.listen(16)
            return s

        self.sock = cluster.topo.call(role, make)
        self.sock.settimeout(0.2)
        self._stop = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop = True
        self._thread.join()
        self.sock.close()


def test_load_to_a_host_outside_the_cluster_is_refused(netns_cluster: NetnsCluster):
    """A host on the same wire that is no node of the cluster: refused before any
    connection is made (--allow-remote does not widen a cluster run)."""
    c = netns_cluster
    listener = Listener(c, "outside")
    try:
        url = f"http://{c.addr('outside')}:8080/hello"
        for extra in ((), ("--allow-remote",)):
            out = c.stackrace(
                "load",
                url,
                "-c",
                "2",
                "-d",
                "1s",
                "--cluster",
                c.address,
                *ROLE_TIMEOUT,
                *extra,
                timeout=300,
                what="stackrace load --cluster to a host outside the cluster",
            )
            assert out.returncode != 0
            assert "neither loopback nor a node of the cluster" in out.stderr, out.stderr
            assert c.addr("outside") in out.stderr
        # the outside host is reachable (from a load host, say): only stackrace refused
        c.topo.call("load1", lambda: socket.create_connection((c.addr("outside"), 8080), 5).close())
        wait_until(lambda: listener.accepted == 1, 10, "the probe's connection accepted")
    finally:
        listener.close()
    assert listener.accepted == 1  # the probe's, none of stackrace's


def _stackraces(cluster: NetnsCluster, role: str) -> list[tuple[str, int, int]]:
    """Listening sockets on a host opened by a process an AppHost or DbHost actor started
    (a stack, MariaDB, their workers) — not Ray's own, nor the actors' own gRPC."""
    import psutil

    found = []
    for addr, port, pid in cluster.topo.listeners(role):
        try:
            above = [" ".join(p.cmdline()) for p in psutil.Process(pid).parents()]
        except psutil.Error:
            continue
        if any(n.startswith(("ray::AppHost", "ray::DbHost")) for n in above):
            found.append((addr, port, pid))
    return found


def test_db_workload_and_every_listener_on_the_app_host(
    netns_cluster: NetnsCluster, tmp_path: Path
):
    """bench --workload db: MariaDB on the app host, a real stack querying it there.
    While it runs: every socket the stacks and the database listen on is the app host's
    address or its loopback; the driver's metrics endpoint is the head's loopback."""
    c = netns_cluster
    app = c.addr("app")
    out_json = tmp_path / "run.json"
    driver = c.driver(
        "bench",
        "--cluster",
        c.address,
        *ROLE_TIMEOUT,
        "--stacks",
        "go-nethttp",
        "--workload",
        "db",
        "--concurrency",
        "4",
        "--duration",
        "15s",  # the listeners are up the whole level: a slow `ss` still sees them
        "--warmup",
        "0s",
        "--metrics",
        "9464",
        "--json",
        str(out_json),
        "--no-progress",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:

        def listening() -> list[tuple[str, int, int]] | None:
            # a bench that ended before both were seen fails now, with its reason (it
            # once ended first on a loaded machine and the wait ran its whole 400 s)
            if driver.poll() is not None:
                assert driver.stderr is not None  # (a pipe)
                pytest.fail(
                    "bench ended before the stack and MariaDB were seen listening "
                    f"(exit {driver.returncode}): {driver.stderr.read()[-2000:]}"
                )
            ls = _stackraces(c, "app")
            return ls if len(ls) >= 2 else None

        seen = wait_until(listening, 400, "the stack and MariaDB listening on the app host")
        metrics = [a for a, port, _ in c.topo.listeners("head") if port == 9464]
        _, err = driver.communicate(timeout=400)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert driver.returncode == 0, err[-3000:]
    assert any(addr == app for addr, _, _ in seen), seen  # the stack, for the load hosts
    assert any(addr == "127.0.0.1" for addr, _, _ in seen), seen  # MariaDB
    assert all(addr in (app, "127.0.0.1") for addr, _, _ in seen), seen
    assert set(metrics) == {"127.0.0.1"}, metrics
    run = json.loads(out_json.read_text())
    (st,) = run["stacks"]
    w = st["levels"][0]["window"]
    assert not st.get("error") and w["ok"] > 5 and w["failures"] == {}, st
