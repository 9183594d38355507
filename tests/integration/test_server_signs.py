"""What the kernel and a server's log say (stacks/listen.py, stacks/logwatch.py), on a
real listening socket and a real log file."""

from __future__ import annotations

import contextlib
import socket
import time

from stackrace.stacks import listen
from stackrace.stacks.listen import listen_state, listen_states


def _connect(port: int, n: int) -> list[socket.socket]:
    out = []
    for _ in range(n):
        c = socket.socket()
        c.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            c.connect(("127.0.0.1", port))
        out.append(c)
    return out


def _wait(predicate, timeout: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_accept_queue_its_limit_and_closed_clients_from_the_kernel():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(3)  # a server that never accepts, with a backlog of 3
        port = server.getsockname()[1]
        idle = listen_state(port)
        assert idle.listening and idle.accept_queue == 0 and idle.backlog == 3
        assert idle.busy == 0 and not idle.full
        clients = _connect(port, 6)
        try:
            # the kernel queues backlog + 1 handshakes, then drops the other SYNs
            assert _wait(lambda: listen_state(port).accept_queue == 4)
            full = listen_state(port)
            assert full.full and full.busy >= 4
            assert "accept queue 4 of 3 (full)" in full.describe()
            accepted, _ = server.accept()
            clients[0].close()  # a client gives up; the server still holds it
            assert _wait(lambda: listen_state(port).close_wait == 1)
            assert "1 closed by clients (CLOSE-WAIT)" in listen_state(port).describe()
            accepted.close()
        finally:
            for c in clients:
                c.close()
    # nothing listens any more
    assert not listen_states([port])[port].listening


def test_the_proc_fallback_has_the_queue_but_not_its_limit(monkeypatch):
    def refuse(family: int) -> list:  # type: ignore[type-arg]
        raise OSError("no netlink here")

    monkeypatch.setattr(listen, "_dump", refuse)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(2)
        port = server.getsockname()[1]
        clients = _connect(port, 2)
        try:
            assert _wait(lambda: listen_state(port).accept_queue == 2)
            state = listen_state(port)
            assert state.backlog is None and not state.full
        finally:
            for c in clients:
                c.close()
