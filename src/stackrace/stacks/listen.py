"""What the kernel holds for a server's port: its accept queue, its backlog, its sockets.

A server that has stopped accepting looks, from the client side, like a slow one: the
clients sit in connect (the engine's `connecting`) and nothing fails until the timeout.
The kernel knows better. For the listening socket it keeps the **accept queue** (the
connections whose handshake completed and that the server has not accepted yet) and
its limit, the **backlog** the server asked for (capped by `net.core.somaxconn`); for
every accepted connection its state, and `CLOSE-WAIT` counts the ones the client has
already given up on while the server still holds them. `ss -ltn` shows the first two
as Recv-Q and Send-Q; this module asks the kernel the same way `ss` does (netlink
`sock_diag`, no root needed for our own network namespace) and falls back to
/proc/net/tcp, which has the queue but not the limit, where netlink is unavailable.

`listen_state(port)` is cheap (one dump of the machine's TCP sockets, ~1 ms for a few
thousand) and is called about once a second per stack.

`exposed(pids)` answers another question from the same table: which of a stack's own
listening sockets are bound beyond loopback. The launcher binds every stack to
127.0.0.1, but an app may open a socket of its own (`0.0.0.0:8080`, a debug port) that
other hosts reach while the race runs; the sockets are matched to the stack's processes
by inode (/proc/PID/fd), and the launcher names any it finds (stacks/launcher.py).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# TCP states (include/net/tcp_states.h)
ESTABLISHED, SYN_RECV, CLOSE_WAIT, LISTEN = 1, 3, 8, 10

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
# only the states asked about: a busy machine holds tens of thousands of TIME-WAIT
# sockets (80,000 seen here), and dumping them costs a quarter of a second
_STATES = (1 << ESTABLISHED) | (1 << SYN_RECV) | (1 << CLOSE_WAIT) | (1 << LISTEN)
_MSG = struct.Struct("=BBBB HH 16s16s I 8s IIIII")  # struct inet_diag_msg (72 bytes)


@dataclass(frozen=True)
class ListenState:
    """One port as the kernel sees it from the server's side."""

    port: int
    listening: bool  # a socket listens on it
    accept_queue: int  # handshakes done, not accepted yet
    backlog: int | None  # the queue's limit (None: unknown, /proc/net/tcp only)
    established: int = 0  # connections open on the server's side (queued or accepted)
    close_wait: int = 0  # ... that the client has already closed
    syn_recv: int = 0  # handshakes under way

    @property
    def full(self) -> bool:
        """The accept queue is at its limit: the kernel now drops new clients' SYNs."""
        return self.backlog is not None and self.accept_queue >= self.backlog > 0

    @property
    def busy(self) -> int:
        """Connections open on the server's side, accepted or not: 0 when it is idle."""
        return self.established + self.close_wait + self.syn_recv

    def describe(self) -> str:
        """ "accept queue 2,049 of 2,048 (full), 1,634 closed by clients (CLOSE-WAIT)" """
        limit = f" of {self.backlog:,}" if self.backlog is not None else ""
        out = f"accept queue {self.accept_queue:,}{limit}" + (" (full)" if self.full else "")
        if self.close_wait:
            out += f", {self.close_wait:,} closed by clients (CLOSE-WAIT)"
        return out


def _sock_diag(family: int, states: int) -> Iterator[tuple[Any, ...]]:
    """Every TCP socket of `family` in `states` (a bit mask), as the kernel's
    inet_diag_msg fields (`_MSG`), from one netlink dump."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as nl:
        nl.settimeout(1.0)
        req = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, states) + bytes(48)
        header = struct.pack("=IHHII", 16 + len(req), _SOCK_DIAG_BY_FAMILY,
                             _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0)  # fmt: skip
        nl.send(header + req)
        while True:
            data = nl.recv(1 << 20)
            offset = 0
            while offset + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, offset)
                if kind == _NLMSG_DONE:
                    return
                if kind == _NLMSG_ERROR:
                    raise OSError("sock_diag refused the dump")
                if length < 16:
                    return
                body = offset + 16
                if body + _MSG.size <= len(data):
                    yield _MSG.unpack_from(data, body)
                offset += (length + 3) & ~3


def _dump(family: int) -> list[tuple[int, int, int, int, int]]:
    """(state, sport, dport, rqueue, wqueue) of every TCP socket of `family`."""
    # sport and dport are big-endian in the message
    return [
        (f[1], socket.ntohs(f[4]), socket.ntohs(f[5]), f[11], f[12])
        for f in _sock_diag(family, _STATES)
    ]


def _proc_tcp(min_fields: int) -> Iterator[tuple[int, list[str]]]:
    """(family, fields) of each socket line of /proc/net/tcp{,6} that has at least
    `min_fields` fields: the kernel's text, where the netlink dump is refused."""
    for name, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) >= min_fields:
                yield family, f


def _from_proc() -> list[tuple[int, int, int, int, int]]:
    """The same from /proc/net/tcp{,6}: a LISTEN socket's rx_queue is its accept
    queue; its limit is not there (tx_queue is 0 for a listener)."""
    out = []
    for _family, f in _proc_tcp(5):
        sport = int(f[1].rsplit(":", 1)[1], 16)
        dport = int(f[2].rsplit(":", 1)[1], 16)
        rx = int(f[4].split(":")[1], 16)
        state = int(f[3], 16)
        if (1 << state) & _STATES:
            out.append((state, sport, dport, rx, -1))
    return out


def listen_states(ports: list[int], ipv6: bool = False) -> dict[int, ListenState]:
    """The kernel's view of each port from the server's side, from one dump of the
    machine's sockets (stacks listen on 127.0.0.1: IPv4 unless `ipv6`). The dump walks
    every socket the kernel holds, TIME-WAIT ones too: ~1 ms on a quiet machine, ~20
    ms on one holding 80,000 of them; call it once for every stack, off the UI's loop."""
    try:
        sockets = _dump(socket.AF_INET) + (_dump(socket.AF_INET6) if ipv6 else [])
    except OSError:
        sockets = _from_proc()
    wanted = set(ports)
    found: dict[int, dict[str, int]] = {p: {} for p in wanted}
    backlog: dict[int, int | None] = dict.fromkeys(wanted)
    for state, sport, _dport, rq, wq in sockets:
        if sport not in wanted:
            continue
        c = found[sport]
        if state == LISTEN:
            c["listen"] = 1
            c["queue"] = c.get("queue", 0) + rq
            if wq >= 0:
                backlog[sport] = (backlog[sport] or 0) + wq
        else:
            c[str(state)] = c.get(str(state), 0) + 1
    return {
        p: ListenState(
            port=p,
            listening=bool(c.get("listen")),
            accept_queue=c.get("queue", 0),
            backlog=backlog[p],
            established=c.get(str(ESTABLISHED), 0),
            close_wait=c.get(str(CLOSE_WAIT), 0),
            syn_recv=c.get(str(SYN_RECV), 0),
        )
        for p, c in found.items()
    }


def listen_state(port: int, ipv6: bool = True) -> ListenState:
    """One port's state (IPv4 and IPv6)."""
    return listen_states([port], ipv6)[port]


def _listeners(family: int) -> list[tuple[str, int, int]]:
    """(address, port, inode) of every listening TCP socket of `family`."""
    size = 4 if family == socket.AF_INET else 16
    return [
        (socket.inet_ntop(family, f[6][:size]), socket.ntohs(f[4]), f[14])
        for f in _sock_diag(family, 1 << LISTEN)
    ]


def _listeners_from_proc() -> list[tuple[str, int, int]]:
    """The same from /proc/net/tcp{,6}."""
    out = []
    for family, f in _proc_tcp(10):
        if int(f[3], 16) == LISTEN:
            hex_addr, hex_port = f[1].rsplit(":", 1)
            raw = bytes.fromhex(hex_addr)
            # the kernel prints each 32-bit word in host order
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            out.append((socket.inet_ntop(family, raw), int(hex_port, 16), int(f[9])))
    return out


def socket_inodes(pids: Iterable[int]) -> set[int]:
    inodes: set[int] = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    return inodes


def _beyond_loopback(address: str, allowed: str) -> bool:
    if address == allowed:
        return False
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not ip.is_loopback


def exposed(pids: Iterable[int], allowed: str = "127.0.0.1") -> list[str]:
    """The listening sockets of these processes bound beyond loopback (and beyond
    `allowed`, the address the launcher gave the stack), as "ADDRESS:PORT", sorted."""
    inodes = socket_inodes(pids)
    if not inodes:
        return []
    try:
        sockets = _listeners(socket.AF_INET) + _listeners(socket.AF_INET6)
    except OSError:
        sockets = _listeners_from_proc()
    out = set()
    for address, port, inode in sockets:
        if inode in inodes and _beyond_loopback(address, allowed):
            out.add(f"[{address}]:{port}" if ":" in address else f"{address}:{port}")
    return sorted(out)


def exposure_line(name: str, address: str) -> str:
    """What is said of a stack's own listener beyond loopback, on screen and in outputs."""
    return (
        f"{name} listens beyond loopback on {address} (its own socket, not the one "
        "stackrace gave it): other hosts can reach it while it runs"
    )
