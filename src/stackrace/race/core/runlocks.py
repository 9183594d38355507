"""Runs that know about each other: every stackrace run that loads servers holds a run
lock, and a new run sees the others that share its cores.

    lock = RunLock.take("bench", cores=[0, 1])     # held until release() or death
    others = other_runs(cores=[0, 1])              # ["pid 4242: stackrace tune … (cpu 0,1)"]
    lock.release()

Two `bench` runs at once on one machine both said "one stack at a time on cpu 0, the
engine on cpu 1" while they shared those cores, and neither warned: each measured the
other's load as its server's slowness. Now each run holds a lock file in one directory
of the machine (paths.run_locks_dir: per user, not per $STACKRACE_HOME, since homes
share cores too) describing itself (pid, command, cores, start), flock'd for as long as
the process lives: the kernel drops the lock when the process dies, even by SIGKILL, so
a file whose lock can be taken is a dead run's and is removed; a file whose lock is
held is a live run. A new run reads the live ones whose cores meet its own and says so
at start and in its output's notes; `bench` and `tune` refuse to measure beside them
unless `--share-cores` (commands/_common.py: `check_shared_cores`).

A run that starts beside another (with --share-cores) also tells it: it appends its own
line to the other's `<lock>.joined` file, which the first run reads before it writes its
output (`RunLock.joined`). The first of two runs thus records the second in its
`other_runs` and notes, as the second records the first: both measured each other.

The directory is made 0700 and must be the user's own, not a link: a lock file is read
as the description of another run and is never followed anywhere. A directory that
cannot be used is no registry at all (the run goes on, and says so), not an error.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import stat
import time
from collections.abc import Sequence
from pathlib import Path

import msgspec

from stackrace.base import paths

SUFFIX = ".run"
JOINED = ".joined"  # beside a run's lock file: the runs that started on its cores since
MAX_LOCK_BYTES = 4096
MAX_JOINED_BYTES = 64 * 1024


class RunInfo(msgspec.Struct, forbid_unknown_fields=True):
    pid: int
    command: str
    cores: list[int]
    started: float  # time.time()

    def describe(self) -> str:
        when = time.strftime("%H:%M:%S", time.localtime(self.started))
        cpus = ",".join(str(c) for c in self.cores)
        return f"pid {self.pid}: stackrace {self.command} (since {when}, cpu {cpus})"


def _registry() -> Path | None:
    """The lock directory, made if missing; None when it is not safe to use."""
    d = paths.run_locks_dir()
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(d)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        return None
    return d


class RunLock:
    """This process's run lock (released on `release()` or by the process's death)."""

    def __init__(self, path: Path | None, fd: int | None) -> None:
        self.path = path
        self._fd = fd

    @classmethod
    def take(cls, command: str, cores: Sequence[int] | None = None) -> RunLock:
        d = _registry()
        if d is None:
            return cls(None, None)
        info = RunInfo(
            pid=os.getpid(),
            command=command[:200],
            cores=sorted(cores if cores is not None else os.sched_getaffinity(0)),
            started=time.time(),
        )
        path = d / f"{os.getpid()}-{secrets.token_hex(4)}{SUFFIX}"
        try:
            # O_CLOEXEC: a server or engine we start must not inherit the lock and keep
            # it alive after we die
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except OSError:
            return cls(None, None)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.write(fd, msgspec.json.encode(info))
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                path.unlink()
            return cls(None, None)
        _tell_others(d, path, info)
        return cls(path, fd)

    def joined(self) -> list[str]:
        """The runs that started on this run's cores after it did (each told it: see the
        module docstring), one line each, oldest first."""
        if self.path is None:
            return []
        try:
            fd = os.open(
                f"{self.path}{JOINED}", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
            )
        except OSError:
            return []
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
                return []
            data = os.read(fd, MAX_JOINED_BYTES)
        except OSError:
            return []
        finally:
            os.close(fd)
        lines = data.decode("utf-8", "replace").splitlines()
        # a line is another run's describe(): printable, or not shown at all
        return list(dict.fromkeys(x for x in lines if x.isprintable() and x.startswith("pid ")))

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is None:
            return
        assert self.path is not None
        for path in (self.path, Path(f"{self.path}{JOINED}")):
            with contextlib.suppress(OSError):
                path.unlink()
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _tell_others(d: Path, mine: Path, info: RunInfo) -> None:
    """Append this run's line to the `.joined` file of every live run on its cores."""
    line = (info.describe() + "\n").encode()
    wanted = set(info.cores)
    try:
        entries = list(os.scandir(d))
    except OSError:
        return
    for entry in entries:
        path = Path(entry.path)
        if not entry.name.endswith(SUFFIX) or path == mine:
            continue
        other = _read_live(path)
        if other is None or other.pid == info.pid or not wanted & set(other.cores):
            continue
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        with contextlib.suppress(OSError):
            fd = os.open(f"{path}{JOINED}", flags, 0o600)
            try:
                if os.fstat(fd).st_size < MAX_JOINED_BYTES:
                    os.write(fd, line)  # one write of a short line: appended whole
            finally:
                os.close(fd)


def other_runs(cores: Sequence[int] | None = None, mine: RunLock | None = None) -> list[str]:
    """The live stackrace runs (not this process) whose cores meet `cores` (default:
    this process's), one line each; dead runs' lock files are removed on the way."""
    d = _registry()
    if d is None:
        return []
    wanted = set(cores if cores is not None else os.sched_getaffinity(0))
    out: list[tuple[float, str]] = []
    try:
        entries = list(os.scandir(d))
    except OSError:
        return []
    for entry in entries:
        if not entry.name.endswith(SUFFIX) or (mine is not None and Path(entry.path) == mine.path):
            continue
        info = _read_live(Path(entry.path))
        if info is None or info.pid == os.getpid():
            continue
        if wanted & set(info.cores):
            out.append((info.started, info.describe()))
    return [text for _, text in sorted(out)]


def _read_live(path: Path) -> RunInfo | None:
    """The run a lock file describes while its lock is held; a dead run's file is
    removed (None), and so is nothing else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                return None
            data = os.read(fd, MAX_LOCK_BYTES)  # held: a live run
            try:
                return msgspec.json.decode(data, type=RunInfo)
            except (msgspec.DecodeError, msgspec.ValidationError):
                return None
        # the lock was free: its run is dead (or has not written it yet: a file this
        # new is left alone)
        if time.time() - st.st_mtime > 5:
            for gone in (path, Path(f"{path}{JOINED}")):
                with contextlib.suppress(OSError):
                    gone.unlink()
        return None
    finally:
        os.close(fd)
