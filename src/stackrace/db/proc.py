"""Process plumbing for mariadbd: finding our server, waiting until it is gone, free
ports (its parent-death signal is supervise/procs.py's `die_with_parent`, the one for
every child)."""

from __future__ import annotations

import contextlib
import resource
import subprocess
import time
from pathlib import Path


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

    return resource.getrlimit(resource.RLIMIT_NOFILE)[1]


def wait_gone(
    pid: int, timeout: float, datadir: Path, child: subprocess.Popen[bytes] | None = None
) -> bool:
    """Until `pid` is no longer our server on `datadir` (False: still there after
    `timeout`), reaping it when it is `child`, the process this one started."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child is not None and child.pid == pid:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=0.05)  # reap our own child
        if not is_our_server(pid, datadir):
            return True
        time.sleep(0.05)
    return False
