"""Requests the server's kernel never acknowledged, made for real: a host of its own (a
network namespace, tests/cluster/netns.py) whose firewall drops every packet after the
SYN from half of the client ports. Those clients' handshakes complete on their side —
they write their requests — and the server never sees an ACK: the case a full listen
backlog makes by dropping a handshake's last ACK, which loopback does not give on demand
(tests/integration/test_unacked.py). The other half are served all along.

The engine reads TCP_INFO for requests over a second old (engine/transport.py
`unacked`); `load` must say *starving* with that cause — not "the server did not keep
up", which is what it said before: the server kept up with everyone it could hear."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.cluster import netns
from tests.helpers import ROOT, TESTSERVER

pytestmark = pytest.mark.cluster

PORT = 18080
# connect() takes ports of the range's first parity first (Linux ≥ 4.6): ten clients get
# the ten even ports of 40000–40019, and the firewall drops five of them
PORTS = "40000 40019"
DROPPED = "40010:40019"


@pytest.fixture
def host():
    why = netns.unavailable()
    if why:
        pytest.skip(f"needs a network namespace: {why}")
    netns.sweep()
    topo = netns.Topology(roles=("app",)).up()
    try:
        topo.run("app", ["sysctl", "-qw", f"net.ipv4.ip_local_port_range={PORTS}"], check=True)
        rule = ["iptables", "-A", "INPUT", "-p", "tcp", "--dport", str(PORT)]
        rule += ["--sport", DROPPED, "!", "--syn", "-j", "DROP"]
        out = topo.run("app", rule, capture_output=True, text=True)
        if out.returncode != 0:
            pytest.skip(f"iptables cannot filter in a namespace here: {out.stderr.strip()}")
        server = topo.popen(
            "app", [sys.executable, str(TESTSERVER), str(PORT)], stdout=subprocess.PIPE
        )
        assert server.stdout is not None and server.stdout.readline().strip() == b"ready"
        yield topo
    finally:
        topo.down()


def load(topo: netns.Topology, *extra: str) -> str:
    argv = [sys.executable, "-m", "stackrace.cli", "load", f"http://127.0.0.1:{PORT}/hello"]
    argv += ["-c", "10", "-d", "4s", "--timeout", "30s", "--no-progress", *extra]
    out = topo.run("app", argv, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.stdout, out.stderr
    return out.stdout


def test_clients_whose_handshake_was_dropped_are_unacked_and_starving(host) -> None:
    total = json.loads(load(host, "--json").splitlines()[0])["total"]
    assert total["requests"] > 1_000  # five clients served all along
    assert total["unacked"] == 5 and total["connecting"] == 0, total
    # five of ten clients for the whole run, less the first second of each wait
    assert 0.3 < total["starved_share"] < 0.5, total
    text = load(host)
    assert "! starving: " in text and "handshakes dropped, requests never acknowledged" in text
    assert "did not keep up" not in text
