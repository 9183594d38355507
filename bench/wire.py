"""The wire's own latency: what tcpdump saw on loopback, request to answer.

A load tool's latency is the wire's plus its own time around each request (scheduling,
the write, the read, its parse, its clock). Two tools that disagree by half a
millisecond on the same server leave open which one is off; the packets settle it. This
captures loopback traffic to one port while a tool runs (`Capture`, tcpdump with kernel
timestamps in nanoseconds) and pairs, per connection, the first data segment a client
sends after its last answer with the first data segment the server sends back
(`wire_latencies`). Each tool's p50 minus the wire's p50 is that tool's own overhead.

Used by rate_timing.py (`--wire`). Needs tcpdump (`apt-get install tcpdump`) and root
(or CAP_NET_RAW). The pcap parsing is written here (a few dozen lines), not a package.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import tempfile
import time
from pathlib import Path

_NANO_MAGIC = 0xA1B23C4D  # pcap with nanosecond timestamps (--time-stamp-precision=nano)
_MICRO_MAGIC = 0xA1B2C3D4
_ETHERTYPE_IPV4 = 0x0800


class Capture:
    """tcpdump on `lo` for TCP segments with a payload to or from `port`, into a pcap."""

    def __init__(self, port: int, cpu: str | None = None) -> None:
        self.port = port
        fd, name = tempfile.mkstemp(prefix="stackrace-wire-", suffix=".pcap")
        os.close(fd)
        self.path = Path(name)
        # only segments that carry data: the IP total length minus both headers
        payload = "(((ip[2:2] - ((ip[0]&0xf)<<2)) - ((tcp[12]&0xf0)>>2)) != 0)"
        cmd = [
            "tcpdump", "-i", "lo", "-n", "-s", "96", "-B", "16384", "-U",
            "--time-stamp-precision=nano", "-w", str(self.path),
            f"tcp port {port} and {payload}",
        ]  # fmt: skip
        if cpu is not None:
            cmd = ["taskset", "-c", cpu, *cmd]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # tcpdump says "listening on lo" once its filter is attached
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline().decode(errors="replace")
        if "listening" not in line:
            self.proc.kill()
            raise RuntimeError(f"tcpdump did not start: {line.strip()}")

    def stop(self) -> tuple[list[int], int]:
        """Stop the capture; the wire latencies (ns) and the packets tcpdump dropped."""
        time.sleep(0.2)  # the last answers' segments reach the buffer
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=10)
        dropped = 0
        for line in err.decode(errors="replace").splitlines():
            if "dropped by kernel" in line:
                dropped = int(line.split()[0])
        try:
            return wire_latencies(self.path.read_bytes(), self.port), dropped
        finally:
            self.path.unlink(missing_ok=True)


def wire_latencies(pcap: bytes, port: int) -> list[int]:
    """Per connection (the client's port), from the first data segment the client sent
    while nothing was pending to the first data segment the server sent after it, in ns."""
    magic = struct.unpack_from("<I", pcap, 0)[0]
    if magic not in (_NANO_MAGIC, _MICRO_MAGIC):
        raise ValueError("not a little-endian pcap file")
    scale = 1 if magic == _NANO_MAGIC else 1000
    linktype = struct.unpack_from("<I", pcap, 20)[0]
    if linktype != 1:  # Linux lo is captured as Ethernet (DLT_EN10MB)
        raise ValueError(f"link type {linktype}: expected Ethernet")
    pending: dict[int, int] = {}  # client port -> when its request's first segment passed
    out: list[int] = []
    off = 24
    n = len(pcap)
    while off + 16 <= n:
        sec, frac, caplen, _ = struct.unpack_from("<IIII", pcap, off)
        off += 16
        pkt = pcap[off : off + caplen]
        off += caplen
        if len(pkt) < 14 + 20 + 20 or struct.unpack_from("!H", pkt, 12)[0] != _ETHERTYPE_IPV4:
            continue
        ihl = (pkt[14] & 0x0F) * 4
        sport, dport = struct.unpack_from("!HH", pkt, 14 + ihl)
        ts = sec * 1_000_000_000 + frac * scale
        if dport == port:  # client -> server: a request starts, unless one is pending
            pending.setdefault(sport, ts)
        elif sport == port:  # server -> client: the answer's first byte
            start = pending.pop(dport, None)
            if start is not None:
                out.append(ts - start)
    return out
