"""A slow link for a host of the test topology: a fixed delay and random loss each way.

    python tests/cluster/delayline.py IFNAME DELAY_MS LOSS_PCT    (inside the host's netns)

`tc qdisc … netem` is the usual tool, and `netem()` uses it where the kernel has it. The
project's VMs run a kernel built without sch_netem (CONFIG_NET_SCH_NETEM is not set, and
it has no loadable modules), so this module also has what netem does, done in user space:

- loss: iptables' `statistic` match drops that share of the packets, in the kernel;
- delay: iptables sends every other packet of the interface, both ways, to NFQUEUE 0 of
  the host's namespace; this process is told of each (metadata only, never the payload)
  and gives the kernel its verdict `delay` later. The delay is the same for every packet,
  so deadlines come in arrival order and one batch verdict releases all that are due.

Queue numbers are per network namespace, so each host's delay line has queue 0 to itself.
The rules say `--queue-bypass`: if this process is gone, packets pass undelayed instead
of being dropped. On SIGTERM it removes its rules. Its cost: ~1 µs of Python per packet.
"""

from __future__ import annotations

import collections
import contextlib
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_CONFIG = 2
NFQNL_MSG_VERDICT_BATCH = 3
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQA_CFG_MASK = 4
NFQA_CFG_FLAGS = 5
NFQA_CFG_F_FAIL_OPEN = 1
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
NF_ACCEPT = 1
QUEUE = 0
SO_RCVBUFFORCE = 33


def _attr(kind: int, payload: bytes) -> bytes:
    head = struct.pack("=HH", 4 + len(payload), kind)
    pad = b"\0" * (-len(payload) % 4)
    return head + payload + pad


def _msg(msg_type: int, attrs: bytes, seq: int = 0) -> bytes:
    body = struct.pack("!BBH", socket.AF_UNSPEC, 0, QUEUE) + attrs
    header = struct.pack(
        "=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg_type, NLM_F_REQUEST, seq, 0
    )
    return header + body


def _iptables() -> str:
    found = shutil.which("iptables")
    if found is None:
        raise RuntimeError("the delay line needs iptables (apt-get install iptables)")
    return found


def rules(ifname: str, loss_pct: float) -> list[list[str]]:
    """iptables arguments (after -I/-D) for both directions of the interface."""
    out = []
    for chain, flag in (("OUTPUT", "-o"), ("INPUT", "-i")):
        out.append(
            [chain, flag, ifname, "-j", "NFQUEUE", "--queue-num", str(QUEUE), "--queue-bypass"]
        )
        if loss_pct > 0:
            out.append(
                [
                    chain,
                    flag,
                    ifname,
                    "-m",
                    "statistic",
                    "--mode",
                    "random",
                    "--probability",
                    f"{loss_pct / 100:.6f}",
                    "-j",
                    "DROP",
                ]
            )
    return out


def install(ifname: str, loss_pct: float, prefix: Sequence[str] = ()) -> None:
    ipt = _iptables()
    for rule in rules(ifname, loss_pct):  # -I: each goes first, so the DROP comes first
        subprocess.run([*prefix, ipt, "-w", "-I", *rule], check=True, capture_output=True)


def uninstall(prefix: Sequence[str] = ()) -> None:
    ipt = _iptables()
    for chain in ("OUTPUT", "INPUT"):
        subprocess.run([*prefix, ipt, "-w", "-F", chain], capture_output=True)


def serve(delay_s: float, ready: Callable[[], None] = lambda: None) -> None:
    """Hold every queued packet `delay_s`, then accept it; until SIGTERM."""
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 16 * 1024 * 1024)
    sock.bind((0, 0))
    cmd = struct.pack("!BBH", NFQNL_CFG_CMD_BIND, 0, 0)
    params = struct.pack("!IB", 0, NFQNL_COPY_META) + b"\0\0\0"
    sock.send(_msg(NFQNL_MSG_CONFIG, _attr(NFQA_CFG_CMD, cmd)))
    sock.send(
        _msg(
            NFQNL_MSG_CONFIG,
            _attr(NFQA_CFG_PARAMS, params[:5])
            + _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", 1 << 16))
            + _attr(NFQA_CFG_MASK, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN))
            + _attr(NFQA_CFG_FLAGS, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN)),
        )
    )
    ready()
    pending: collections.deque[tuple[float, int]] = collections.deque()
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    unpack_nl = struct.Struct("=IHH").unpack_from
    unpack_attr = struct.Struct("=HH").unpack_from
    packet_type = (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET
    now = time.monotonic
    while True:
        wait = max(0.0, pending[0][0] - now()) if pending else None
        readable, _, _ = select.select([sock], [], [], wait)
        if readable:
            while True:
                try:
                    n = sock.recv_into(buf, len(buf), socket.MSG_DONTWAIT)
                except BlockingIOError:
                    break
                except OSError:  # ENOBUFS: notifications lost; later batches release them
                    continue
                due = now() + delay_s
                off = 0
                while off + 16 <= n:
                    length, kind, _flags = unpack_nl(view, off)
                    if length < 16:
                        break
                    if kind == packet_type:
                        a = off + 20  # nlmsghdr (16) + nfgenmsg (4)
                        end = off + length
                        while a + 4 <= end:
                            alen, atype = unpack_attr(view, a)
                            if atype & 0x7FFF == NFQA_PACKET_HDR:
                                pending.append((due, struct.unpack_from("!I", view, a + 4)[0]))
                                break
                            a += (alen + 3) & ~3
                    off += (length + 3) & ~3
        if pending and pending[0][0] <= now():
            last = 0
            t = now()
            while pending and pending[0][0] <= t:
                last = pending.popleft()[1]
            verdict = struct.pack("!II", NF_ACCEPT, last)
            with contextlib.suppress(OSError):
                sock.send(_msg(NFQNL_MSG_VERDICT_BATCH, _attr(NFQA_VERDICT_HDR, verdict)))


# --- used by the topology (tests/cluster/netns.py) --------------------------------------


def netem(ends: Sequence[tuple[str, str]], delay_ms: float, loss_pct: float) -> str | None:
    """tc netem on both ends of the host's veth (namespace, interface), so that each way
    is delayed as the delay line does; None where the kernel has no netem (the caller
    starts the delay line instead)."""
    if shutil.which("tc") is None:
        return None
    spec = ["delay", f"{delay_ms}ms"] + (["loss", f"{loss_pct}%"] if loss_pct else [])
    for netns, ifname in ends:
        out = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                netns,
                "tc",
                "qdisc",
                "replace",
                "dev",
                ifname,
                "root",
                "netem",
                *spec,
            ],
            capture_output=True,
            text=True,
        )
        if out.returncode != 0:
            no_netem(ends)
            return None
    return "tc netem"


def no_netem(ends: Sequence[tuple[str, str]]) -> None:
    for netns, ifname in ends:
        subprocess.run(
            ["ip", "netns", "exec", netns, "tc", "qdisc", "del", "dev", ifname, "root"],
            capture_output=True,
        )


def start(prefix: Sequence[str], delay_ms: float, loss_pct: float) -> subprocess.Popen[bytes]:
    """The delay line for the host that `prefix` (ip netns exec NS) runs in; returns once
    its rules are in and it holds packets."""
    proc = subprocess.Popen(
        [*prefix, sys.executable, __file__, "--", str(delay_ms), str(loss_pct)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != b"ready":
        proc.kill()
        proc.wait()
        raise RuntimeError("the delay line did not start")
    return proc


def stop(prefix: Sequence[str], proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    uninstall(prefix)


def main(argv: list[str]) -> int:
    """Run inside the host's namespace: every non-loopback interface gets the delay."""
    if argv[:1] == ["--"]:
        argv = argv[1:]
    delay_ms, loss_pct = float(argv[0]), float(argv[1])
    ifaces = [n for _, n in socket.if_nameindex() if n != "lo"]

    def bye(*_: object) -> None:
        uninstall()
        sys.exit(0)

    signal.signal(signal.SIGTERM, bye)
    signal.signal(signal.SIGINT, bye)
    try:

        def ready() -> None:
            for ifname in ifaces:
                install(ifname, loss_pct)
            sys.stdout.write("ready\n")
            sys.stdout.flush()

        serve(delay_ms / 1000.0, ready)
    finally:
        uninstall()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
