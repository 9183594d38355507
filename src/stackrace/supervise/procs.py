"""Process plumbing: children that die with stackrace, and finding a stack's processes."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_PR_SET_PTRACER = 0x59616D61  # Yama's: name the one process (and its children) that may trace
_libc: ctypes.CDLL | None = None


def follow_parent(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send this process `sig` when its parent dies (Linux only).

    The one place parent death is asked for: the preexec_fns below (stacks, mariadbd)
    and the engine process itself (engine/worker.py) all call it. False when the parent
    had already died before the request was in place (the caller should exit), or when
    the kernel cannot be asked (then nothing changes).

    PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, so children
    must be started from a long-lived thread (the main or event-loop thread).
    """
    global _libc
    parent = os.getppid()
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        _libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except (OSError, AttributeError):
        return True
    return os.getppid() == parent and parent != 1


def allow_tracing_by(pid: int) -> None:
    """Let `pid` and its descendants trace this process where Yama's ptrace_scope is 1
    (a process may otherwise trace only its own descendants): stackrace names itself in
    a stack's preexec so that its sampler (py-spy, a child of stackrace, not an
    ancestor of the stack) may read the stack's stacks. It loosens nothing else: the
    machine's policy stays, and only stackrace's own tree is named. Yama keeps the name
    for this process alone (not its forks: a preforking server's workers are not
    covered) and ignores it at scope 2 and 3; without Yama the call fails, harmlessly."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        _libc.prctl(_PR_SET_PTRACER, pid, 0, 0, 0)
    except (OSError, AttributeError):
        return


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None]:
    """A preexec_fn: the child gets `sig` when the forking thread ends, and exits at
    once when its parent died between the fork and the request."""
    parent = os.getpid()

    def setup() -> None:
        follow_parent(sig)
        if os.getppid() != parent:  # the parent died between fork and prctl
            os._exit(1)

    return setup


def child_setup(
    cpus: list[int] | None = None, cgroup: Path | None = None, must_enter: bool = True
) -> Callable[[], None]:
    """A preexec_fn: die with the parent, optionally pin to CPUs and enter a cgroup
    (`must_enter=False`: where the kernel lets it; a cgroup that only tracks)."""
    follow = die_with_parent(signal.SIGKILL)
    procs_file = str(cgroup / "cgroup.procs") if cgroup else None
    stackrace = os.getpid()

    def setup() -> None:
        follow()
        allow_tracing_by(stackrace)  # its evidence sampler (stackrace.evidence)
        if cpus:
            os.sched_setaffinity(0, cpus)
        if procs_file:
            try:
                fd = os.open(procs_file, os.O_WRONLY)
                try:
                    os.write(fd, b"0")
                finally:
                    os.close(fd)
            except OSError:
                if must_enter:
                    raise

    return setup


def keep_off(cpus: Iterable[int]) -> None:
    """Move this process off `cpus` (the engines' cores) when it may run elsewhere (it
    stays where it is when it has no other core or may not move).

    The driver reads every engine's report (four a second), and a report it is woken for
    on an engine's core runs there at once, before the engine's next due sends: with the
    engine pinned to core 1 and the driver free to float, the kernel woke the driver on
    the engine's core (beside the process that wrote to it) and rate mode's p99 send
    lateness at 20,000 req/s was 0.4–1.3 ms in three runs; kept off, 0.2 ms
    (bench/rate_timing.py --engine-core). Children started later inherit the mask: for
    `load`, which starts no servers, that is nothing but the engines, pinned themselves.
    bench and the app do not move it: there the other cores are the servers'."""
    allowed = os.sched_getaffinity(0)
    rest = allowed - set(cpus)
    if rest and rest != allowed:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, rest)


def proc_files(name: str) -> Iterator[tuple[int, bytes]]:
    """(pid, the bytes of /proc/PID/`name`) of every live process this user may read
    (a process gone meanwhile, or not ours to read, is passed over)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/{name}", "rb") as f:
                data = f.read()
        except OSError:
            continue
        yield int(entry.name), data


def _stat_fields() -> Iterator[tuple[int, list[bytes]]]:
    """(pid, fields after the command name) of every process, from /proc/PID/stat."""
    for pid, stat in proc_files("stat"):
        # the command name may hold spaces and parentheses: fields start after the last ')'
        yield pid, stat[stat.rfind(b")") + 2 :].split()


def parent_map() -> dict[int, int]:
    """pid → parent pid of every live process, in one pass over /proc."""
    return {pid: int(f[1]) for pid, f in _stat_fields() if len(f) > 1 and f[0] != b"Z"}


def tree_cpu_ticks(root: int) -> int:
    """CPU time (clock ticks: user + system, and of the children it has waited for) of
    `root` and every live descendant, in one pass over /proc."""
    children: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    for pid, f in _stat_fields():
        if len(f) < 15:
            continue
        children.setdefault(int(f[1]), []).append(pid)
        ticks[pid] = int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += ticks.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total


def pids_in_sessions(sessions: Iterable[int]) -> list[int]:
    """Every live process whose session id is one of `sessions` (reads /proc)."""
    wanted = set(sessions)
    return [
        pid
        for pid, fields in _stat_fields()
        if len(fields) > 3 and int(fields[3]) in wanted and fields[0] != b"Z"
    ]


def signal_sessions(sessions: Iterable[int], sig: int) -> int:
    """Send `sig` to every process in these sessions; return how many were signalled."""
    n = 0
    for pid in pids_in_sessions(sessions):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
            n += 1
    return n
