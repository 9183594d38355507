"""Which waiting requests the server's kernel never acknowledged (TCP_INFO), against a
real listener: one whose backlog holds two connections and which never accepts. The
two in its accept queue have their requests acknowledged and unread (as a worker held by
another keep-alive connection leaves them); on loopback this kernel drops the others'
SYNs outright, so they are `connecting`, not `unacked`. (A handshake whose last ACK a
full backlog dropped — the client connected, its request never acknowledged — needs a
race between the SYN and the ACK that loopback does not give on demand: a namespace's
firewall makes it in tests/cluster/test_netns_unacked.py; the unit test reads the
field's offset.) The starving verdict's sentence tells the causes apart by
these figures (race/live/explain.py)."""

from __future__ import annotations

import json
import socket

from tests.helpers import run_cli


def test_a_real_socket_reads_as_acknowledged() -> None:
    from stackrace.engine.transport import unacked

    with (
        socket.create_server(("127.0.0.1", 0)) as srv,
        socket.create_connection(srv.getsockname()) as c,
    ):
        c.sendall(b"GET / HTTP/1.1\r\n\r\n")  # queued, unread: acknowledged by the kernel
        info = c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 28)
        assert len(info) == 28 and info[0] == 1  # tcpi_state: TCP_ESTABLISHED
        assert unacked(c) == 0


def test_requests_a_full_backlog_dropped_are_unacked_and_queued_ones_are_not() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)  # never accepted: 2 fit in the accept queue
        port = listener.getsockname()[1]
        r = run_cli(
            "load", f"http://127.0.0.1:{port}/", "-c", "12", "-d", "2.5s",
            "--timeout", "20s", "--json", "--no-progress",
            timeout=60,
        )  # fmt: skip
    assert r.stdout, r.stderr
    w = json.loads(r.stdout)["total"]
    assert w["requests"] == 0 and w["waiting"] == 12, w
    # a SYN dropped outright: `connecting`; the two queued have theirs acknowledged
    assert w["connecting"] == 10 and w["unacked"] == 0, w


def test_load_names_clients_a_worker_held_by_one_keepalive_connection_starves() -> None:
    """One worker staying on a keep-alive connection: of three clients one is served, the
    others wait acknowledged and unread. `load` says starving, and where they are — it
    said "the server did not keep up", which the served client contradicts."""
    from tests.helpers import ROOT, TestServer

    server = TestServer(ROOT / "tests" / "servers" / "one_at_a_time.py", "--keepalive", "--ms", "2")
    try:
        r = run_cli(
            "load", server.url("/"), "-c", "3", "-d", "3s", "--timeout", "30s", "--no-progress",
            timeout=60,
        )  # fmt: skip
    finally:
        server.kill()
    assert "! starving: " in r.stdout, r.stdout
    assert "its kernel has their requests, the server reads others first" in r.stdout
    assert "while the others were answered" in r.stdout
    assert "did not keep up" not in r.stdout
