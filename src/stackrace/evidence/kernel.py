"""The kernel's side of an evidence window: what every process of a stack is doing, read
from /proc, whatever language it is written in.

These reads serve every stack: a Go, Node, nginx or PHP-FPM server cannot be sampled
for its stacks, but the kernel knows for each of its threads whether it runs, and if
not, in which system call it sleeps (`/proc/PID/task/TID/syscall`: a futex, a
nanosleep, a read on a socket, an epoll_wait for work) and in which kernel function
(`wchan`); for each process how much CPU it used and how long its threads were
runnable but waited for a core (`schedstat`). For a Python thread the same read
sorts what py-spy reports as "not active" into a sleep, a socket read or a lock.

Every read is of one small file, a few microseconds; a process or thread that ends
between the listing and the read is simply skipped (it is gone: nothing to report).
System calls are named from a short table of the ones a server sleeps in, per machine
architecture; any other is "syscall N", which is still a fact.
"""

from __future__ import annotations

import os
import platform
from collections import Counter
from dataclasses import dataclass, field

from stackrace.evidence.model import ThreadState
from stackrace.stacks.listen import socket_inodes

# the system calls a server's thread is found sleeping in, by number
_X86_64 = {
    0: "read", 1: "write", 7: "poll", 17: "pread64", 18: "pwrite64", 19: "readv",
    20: "writev", 23: "select", 24: "sched_yield", 34: "pause", 35: "nanosleep",
    42: "connect", 43: "accept", 44: "sendto", 45: "recvfrom", 46: "sendmsg",
    47: "recvmsg", 61: "wait4", 128: "rt_sigtimedwait", 130: "rt_sigsuspend", 202: "futex",
    230: "clock_nanosleep", 232: "epoll_wait", 247: "waitid", 270: "pselect6",
    271: "ppoll", 281: "epoll_pwait", 288: "accept4", 441: "epoll_pwait2",
    449: "futex_waitv",
}  # fmt: skip
_AARCH64 = {
    22: "epoll_pwait", 63: "read", 64: "write", 65: "readv", 66: "writev", 67: "pread64",
    68: "pwrite64", 72: "pselect6", 73: "ppoll", 98: "futex", 101: "nanosleep",
    115: "clock_nanosleep", 124: "sched_yield", 133: "rt_sigsuspend", 137: "rt_sigtimedwait",
    202: "accept",
    203: "connect", 206: "sendto", 207: "recvfrom", 211: "sendmsg", 212: "recvmsg",
    242: "accept4", 260: "wait4", 441: "epoll_pwait2", 449: "futex_waitv",
}  # fmt: skip
SYSCALLS = _AARCH64 if platform.machine() in ("aarch64", "arm64") else _X86_64

# what a thread sleeping in each call is doing, from the kernel alone
SLEEPS = frozenset({"nanosleep", "clock_nanosleep", "pause"})
IO = frozenset({
    "read", "write", "pread64", "pwrite64", "readv", "writev", "connect", "sendto",
    "recvfrom", "sendmsg", "recvmsg", "poll", "ppoll",
})  # fmt: skip
WAITS_FOR_WORK = frozenset({
    "accept", "accept4", "epoll_wait", "epoll_pwait", "epoll_pwait2", "select",
    "pselect6", "wait4", "waitid", "rt_sigtimedwait", "rt_sigsuspend",
})  # fmt: skip
LOCKS = frozenset({"futex", "futex_waitv"})
RUNNING = "running"  # what /proc/…/syscall says of a thread on a CPU

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def syscall_of(pid: int, tid: int) -> str:
    """The system call thread `tid` of `pid` sleeps in, by name; "running" when it is
    on a CPU (or about to be), "" when unreadable (gone, or not ours to read)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/syscall", "rb") as f:
            text = f.read(64)
    except OSError:
        return ""
    head = text.split(b" ", 1)[0].strip()
    if head == b"running":
        return RUNNING
    try:
        number = int(head)
    except ValueError:
        return ""
    if number < 0:  # blocked outside any system call (a page fault): running, for us
        return RUNNING
    return SYSCALLS.get(number, f"syscall {number}")


def kernel_state(syscall: str) -> ThreadState:
    """What a thread is doing, from its system call alone (the non-Python processes)."""
    if syscall == RUNNING:
        return ThreadState.ON_CPU
    if syscall in SLEEPS or syscall in IO:
        return ThreadState.BLOCKED
    if syscall in WAITS_FOR_WORK:
        return ThreadState.IDLE
    if syscall in LOCKS:
        # a futex: a lock, or (Go, Node, a thread pool) a thread parked with no work;
        # the kernel cannot tell which, so it counts as waiting for work
        return ThreadState.IDLE
    return ThreadState.UNKNOWN


def threads_of(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def _read(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(4096).decode("utf-8", "replace")
    except OSError:
        return ""


def wchan_of(pid: int) -> str:
    """The kernel function the process's main thread sleeps in ("" running/unreadable)."""
    text = _read(f"/proc/{pid}/wchan").strip()
    return "" if text == "0" else text[:64]


def comm_of(pid: int) -> str:
    return _read(f"/proc/{pid}/comm").strip()[:32]


def cpu_ticks(pid: int) -> int:
    """User + system clock ticks of the process (all its threads)."""
    stat = _read(f"/proc/{pid}/stat")
    fields = stat[stat.rfind(")") + 2 :].split()
    try:
        return int(fields[11]) + int(fields[12])
    except (IndexError, ValueError):
        return 0


def core_wait_ns(pid: int, tids: list[int]) -> int:
    """Nanoseconds its threads spent runnable on a run queue, waiting for a core."""
    total = 0
    for tid in tids:
        try:
            total += int(_read(f"/proc/{pid}/task/{tid}/schedstat").split()[1])
        except (IndexError, ValueError):
            continue
    return total


def listen_counters() -> tuple[int, int]:
    """The machine's (ListenOverflows, ListenDrops) so far, from /proc/net/netstat."""
    lines = _read("/proc/net/netstat").splitlines()
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if not names.startswith("TcpExt:"):
            continue
        table = dict(zip(names.split(), values.split(), strict=False))
        try:
            return int(table.get("ListenOverflows", 0)), int(table.get("ListenDrops", 0))
        except ValueError:
            return 0, 0
    return 0, 0


@dataclass
class ProcessWatch:
    """One process over the window: its first and last CPU and core-wait reads, and the
    system calls and wait channels seen at each round."""

    pid: int
    name: str
    ticks0: int
    wait0: int
    threads: int = 1
    ticks1: int = 0
    wait1: int = 0
    syscalls: Counter[str] = field(default_factory=Counter)
    wchans: Counter[str] = field(default_factory=Counter)
    states: Counter[str] = field(default_factory=Counter)  # ThreadState value → reads
    # each thread's system calls over the rounds (tid → name → reads), and the rounds
    # in which another thread of the process was running (the GIL's likely holder)
    per_thread: dict[int, Counter[str]] = field(default_factory=dict)
    others_running: Counter[int] = field(default_factory=Counter)
    gone: bool = False

    @classmethod
    def start(cls, pid: int) -> ProcessWatch:
        tids = threads_of(pid)
        return cls(pid, comm_of(pid), cpu_ticks(pid), core_wait_ns(pid, tids), len(tids) or 1)

    def read(self) -> dict[int, str]:
        """One round: every thread's system call (tid → name), counted."""
        out: dict[int, str] = {}
        tids = threads_of(self.pid)
        if not tids:
            self.gone = True
            return out
        self.threads = max(self.threads, len(tids))
        for tid in tids:
            call = syscall_of(self.pid, tid)
            if not call:
                continue
            out[tid] = call
            self.syscalls["" if call == RUNNING else call] += 1
            self.states[kernel_state(call).value] += 1
            self.per_thread.setdefault(tid, Counter())[call] += 1
        running = [tid for tid, call in out.items() if call == RUNNING]
        for tid in out:
            if len(running) > (tid in running):
                self.others_running[tid] += 1
        self.wchans[wchan_of(self.pid)] += 1
        return out

    def finish(self) -> None:
        tids = threads_of(self.pid)
        if not tids:
            self.gone = True
            return
        self.ticks1, self.wait1 = cpu_ticks(self.pid), core_wait_ns(self.pid, tids)

    def cpu_share(self, seconds: float) -> float:
        if self.gone or seconds <= 0:
            return 0.0
        return max(0, self.ticks1 - self.ticks0) / _TICK / seconds

    def core_wait_share(self, seconds: float) -> float:
        if self.gone or seconds <= 0:
            return 0.0
        return max(0, self.wait1 - self.wait0) / 1e9 / seconds

    @staticmethod
    def most(counter: Counter[str]) -> str:
        """The most frequent non-empty value ("" when none)."""
        for value, _n in counter.most_common():
            if value:
                return value
        return ""


def connections_to(pids: list[int], port: int) -> int:
    """Established TCP connections of these processes to `port` on any host (the app's
    connections to its database), matched by socket inode (/proc/net/tcp{,6})."""
    inodes = socket_inodes(pids)
    if not inodes:
        return 0
    n = 0
    for name in ("tcp", "tcp6"):
        for line in _read_all(f"/proc/net/{name}").splitlines()[1:]:
            f = line.split()
            if len(f) < 10 or f[3] != "01":  # ESTABLISHED
                continue
            try:
                if int(f[2].rsplit(":", 1)[1], 16) == port and int(f[9]) in inodes:
                    n += 1
            except (IndexError, ValueError):
                continue
    return n


def _read_all(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(1 << 26).decode("ascii", "replace")
    except OSError:
        return ""
