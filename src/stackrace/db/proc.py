"""Process plumbing for mariadbd: parent-death signal, finding our server, free ports."""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A preexec_fn that makes the child get `sig` when the forking thread ends.

    SIGTERM rather than SIGKILL: mariadbd shuts down cleanly on it, so MyISAM tables
    are not left marked as crashed. The kernel ties this to the *thread* that forked,
    so callers must spawn from a long-lived thread (the main or event-loop thread).
    """
    parent = os.getpid()

    def setup() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:  # the parent died between fork and prctl
            os._exit(1)

    return setup


def read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None


def is_our_server(pid: int, datadir: Path) -> bool:
    """True when `pid` is a live mariadbd serving `datadir` (guards against reused pids)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    args = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
    if not args or not Path(args[0]).name.startswith(("mariadbd", "mysqld")):
        return False
    return f"--datadir={datadir}" in args and not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2 :].split()[:1] == [b"Z"]


def process_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def nofile_hard_limit() -> int:
    import resource

    return resource.getrlimit(resource.RLIMIT_NOFILE)[1]
