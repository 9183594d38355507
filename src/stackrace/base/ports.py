"""Loopback ports: a free one, whether one is taken, who listens on one.

The one home for these helpers (the launcher, the private MariaDB and URL targets all
need them)."""

from __future__ import annotations

import contextlib
import errno
import socket

LOOPBACK = "127.0.0.1"


def free_port(host: str = LOOPBACK) -> int:
    """A port nothing listens on right now (the kernel's choice)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_in_use(port: int, host: str = LOOPBACK) -> bool:
    """True when something accepts connections on host:port, or the port cannot be bound."""
    with socket.socket() as s, contextlib.suppress(OSError):
        s.settimeout(0.2)
        if s.connect_ex((host, port)) == 0:
            return True
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            return exc.errno in (errno.EADDRINUSE, errno.EACCES)
    return False


def pid_listening_on(port: int) -> int | None:
    """The pid of the process listening on a TCP port, when we may see it."""
    try:
        import psutil

        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
                return conn.pid
    except Exception:  # best effort: permissions, psutil quirks
        return None
    return None
