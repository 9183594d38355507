"""Finding every process a stack made, even one that left its session, and ending them.

A stack is started in a session of its own, and stopping it signals that session. A
process that calls setsid() (a `setsid sleep` from a worker) or double-forks (a daemon
started by an app's import) is in no session of ours, and outlived stackrace on quit and
on SIGKILL. Four ways to find such processes, used together, because each misses a
case the others cover:

- **A cgroup per stack** (cgroup v2, where this process may make one: root, or a
  delegated subtree). Every descendant is born in its parent's cgroup and stays there
  whatever it does with sessions or parents; `cgroup.kill` (Linux 5.14) kills them all
  at once. This is the complete answer, where it is available (`tracking_cgroup`).
- **An environment token.** Each stack's processes get `STACKRACE_STACK=<random>`;
  children inherit their environment, so /proc/PID/environ finds a daemon wherever it
  went (`pids_with_token`). Only a process that wipes its environment escapes it.
- **The descendants** of the stack's own processes, while their parents live.
- **Child subreaper.** The `stackrace` command asks to be the subreaper of its
  descendants (`become_subreaper`, PR_SET_CHILD_SUBREAPER, in cli.main): an orphan is
  re-parented to stackrace instead of init, so it stays in the tree, and stackrace
  reaps it once killed (`reap`) rather than leaving a zombie.

`stack_pids` gathers them; the launcher's stop and the SIGKILL watchdog both end what it
finds (SIGTERM, the grace time, SIGKILL, `cgroup.kill`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
from collections.abc import Iterable
from pathlib import Path

from stackrace.supervise.procs import parent_map, pids_in_sessions, proc_files

TOKEN_VAR = "STACKRACE_STACK"
_PR_SET_CHILD_SUBREAPER = 36
_TOKEN = re.compile(r"^[0-9a-f]{32}$")


# --- the environment token ------------------------------------------------------------


def new_token() -> str:
    # os.urandom, as secrets.token_hex is made: `secrets` (with random and hashlib, ~1.5
    # ms) is not imported at every start, which keeps start-up fast
    return os.urandom(16).hex()


def pids_with_token(tokens: Iterable[str]) -> list[int]:
    """Every live process whose environment holds STACKRACE_STACK=<one of `tokens`>
    (readable for this user's processes, all of them for root)."""
    wanted = {f"{TOKEN_VAR}={t}".encode() for t in tokens if _TOKEN.match(t)}
    if not wanted:
        return []
    me = os.getpid()
    return [
        pid
        for pid, env in proc_files("environ")
        if pid != me and any(var in env.split(b"\0") for var in wanted)
    ]


# --- descendants and the subreaper ----------------------------------------------------


def descendants(roots: Iterable[int], parents: dict[int, int] | None = None) -> set[int]:
    """The live descendants of `roots` (not the roots themselves)."""
    parents = parent_map() if parents is None else parents
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    out: set[int] = set()
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def become_subreaper() -> bool:
    """Make this process the subreaper of its descendants (Linux ≥ 3.4); False where the
    kernel cannot be asked."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def reap(pids: Iterable[int]) -> None:
    """Collect the exit status of those of `pids` that are this process's children and
    have ended (orphans it adopted as subreaper): no zombie is left behind."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


# --- cgroups ----------------------------------------------------------------------------


def _v2_mount() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or
    /sys/fs/cgroup/unified on a hybrid system), or None."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    found = [
        line.split()[1] for line in mounts if len(line.split()) > 2 and line.split()[2] == "cgroup2"
    ]
    for preferred in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if preferred in found:
            return Path(preferred)
    return Path(found[0]) if found else None


def tracking_cgroup(name: str) -> Path | None:
    """A new cgroup v2 directory for one stack's processes (under `stackrace/` at the
    hierarchy's top), or None where none can be made here (no cgroup v2, not writable:
    the other three ways still hold)."""
    mount = _v2_mount()
    if mount is None:
        return None
    parent = mount / "stackrace"
    d = parent / f"{name}-{os.getpid()}-{os.urandom(3).hex()}"
    try:
        parent.mkdir(exist_ok=True)
        d.mkdir()
    except OSError:
        return None
    if not (d / "cgroup.procs").exists():
        remove_cgroup(d)
        return None
    return d


def cgroup_pids(d: Path) -> list[int]:
    """The processes in the cgroup and every cgroup below it."""
    out: list[int] = []
    with contextlib.suppress(OSError):
        for procs in [d / "cgroup.procs", *d.glob("**/cgroup.procs")]:
            with contextlib.suppress(OSError):
                out += [int(x) for x in procs.read_text().split()]
    return sorted(set(out))


def kill_cgroup(d: Path) -> None:
    """SIGKILL everything in the cgroup: `cgroup.kill` where the kernel has it (one
    write, race-free against forks), else each process it lists."""
    kill = d / "cgroup.kill"
    if kill.exists():
        with contextlib.suppress(OSError):
            kill.write_text("1")
            return
    signal_pids(cgroup_pids(d), signal.SIGKILL)


def remove_cgroup(d: Path) -> None:
    """Remove the (empty) cgroup; left as it is while a process is still in it."""
    for child in sorted(d.glob("**/"), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            child.rmdir()


# --- all of them ------------------------------------------------------------------------


def stack_pids(
    sessions: Iterable[int],
    roots: Iterable[int] = (),
    cgroups: Iterable[Path] = (),
    tokens: Iterable[str] = (),
) -> set[int]:
    """Every live process of a stack found by any of the four ways (module docstring)."""
    sessions, roots = list(sessions), list(roots)
    found = set(pids_in_sessions(sessions))
    found |= descendants([*roots, *found])
    for d in cgroups:
        found |= set(cgroup_pids(d))
    found |= set(pids_with_token(tokens))
    found.discard(os.getpid())
    return found


def signal_pids(pids: Iterable[int], sig: int) -> int:
    n = 0
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
            n += 1
    return n


def alive(pids: Iterable[int]) -> list[int]:
    """Those of `pids` still running (a zombie has ended: only its parent's wait is due)."""
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        if stat[stat.rfind(b")") + 2 :][:1] != b"Z":
            out.append(pid)
    return out
