"""Loopback ports: a free one, whether one is taken, who listens on one.

The one home for these helpers (the launcher, the private MariaDB and URL targets all
need them)."""

from __future__ import annotations

import contextlib
import errno
import random
import socket

LOOPBACK = "127.0.0.1"


# where listening ports are picked when the kernel's ephemeral range leaves room below it
LISTEN_PORTS = (10000, 32767)


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port(host: str = LOOPBACK) -> int:
    """A port nothing listens on right now, outside the kernel's ephemeral range.

    The kernel's own choice (bind to port 0) comes from the ephemeral range, the range
    every outgoing connection takes its local port from: the engine's thousands of
    connections, a build's, a browser's. A port picked there can be taken by one of them
    before the stack binds it (uvicorn exited "address already in use" beside a test lane
    loading another server). Below the range only listeners compete; the kernel's choice
    is the fallback when the range leaves no room."""
    lo, hi = LISTEN_PORTS
    eph_lo, eph_hi = _ephemeral_range()
    if eph_lo <= hi and eph_hi >= lo:  # the ranges overlap: keep below it
        hi = eph_lo - 1
    if hi - lo >= 1000:
        rng = random.SystemRandom()
        for _ in range(64):
            port = rng.randint(lo, hi)
            with socket.socket() as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue
                return port
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
        import psutil  # lazy: keeps start-up fast

        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
                return conn.pid
    except Exception:  # best effort: permissions, psutil quirks
        return None
    return None
