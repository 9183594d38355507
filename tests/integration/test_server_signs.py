"""What the kernel and a server's log say (stacks/listen.py, stacks/logwatch.py), on a
real listening socket and a real log file."""

from __future__ import annotations

import contextlib
import socket
from typing import NoReturn

from stackrace.stacks import listen
from stackrace.stacks.listen import listen_state, listen_states
from tests.helpers import wait_for


def _connect(port: int, n: int) -> list[socket.socket]:
    out = []
    for _ in range(n):
        c = socket.socket()
        c.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            c.connect(("127.0.0.1", port))
        out.append(c)
    return out


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
            assert wait_for(lambda: listen_state(port).accept_queue == 4, 10.0)
            full = listen_state(port)
            assert full.full and full.busy >= 4
            assert "accept queue 4 of 3 (full)" in full.describe()
            accepted, _ = server.accept()
            clients[0].close()  # a client gives up; the server still holds it
            assert wait_for(lambda: listen_state(port).close_wait == 1, 10.0)
            assert "1 closed by clients (CLOSE-WAIT)" in listen_state(port).describe()
            accepted.close()
        finally:
            for c in clients:
                c.close()
    # nothing listens any more
    assert not listen_states([port])[port].listening


def test_the_proc_fallback_has_the_queue_but_not_its_limit(monkeypatch):
    def refuse(family: int) -> NoReturn:
        raise OSError("no netlink here")

    monkeypatch.setattr(listen, "_dump", refuse)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(2)
        port = server.getsockname()[1]
        clients = _connect(port, 2)
        try:
            assert wait_for(lambda: listen_state(port).accept_queue == 2, 10.0)
            state = listen_state(port)
            assert state.backlog is None and not state.full
        finally:
            for c in clients:
                c.close()
