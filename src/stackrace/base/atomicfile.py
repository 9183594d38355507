"""Writing a file so that it is whole or not there: never half a result.

    write_atomic(path, text_or_bytes)        # raises WriteError naming the file and why

The data goes to a temporary file in the same directory (same file system, so the
rename cannot turn into a copy), is flushed and fsync'd, and is then renamed over the
target with os.replace, which is atomic on POSIX: a reader sees the old file or the
new one, never a mix. When anything fails (a full disk, a quota, a read-only mount, an
I/O error, a signal) the temporary file is removed and the target is left as it was:
no 4 KB of invalid JSON where a run should be.

Every output file stackrace writes goes through here (bench's and report's files,
`load --hdr-out`, the app's summary export, the last race's choices): one place that
knows how, instead of a `write_text` per format that each get wrong in their own way.

The new file gets the mode an ordinary write would give it: the old file's when it is
replaced, else 0666 less the umask (mkstemp's 0600 would make a report unreadable to
the colleague it was written for). A target that is a symlink is written through, to
the file it points to, as `open(path, "w")` would: the user named that path.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from stackrace.base.errors import StackraceError


class WriteError(StackraceError, OSError):
    """A file could not be written; str() names the file and the cause."""

    def __init__(self, path: Path, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror or str(cause))
        self.path = path
        self.cause = cause

    def __str__(self) -> str:
        return f"{self.path}: not written: {self.strerror or self.cause}"


def write_atomic(path: str | os.PathLike[str], data: str | bytes, mode: int | None = None) -> None:
    """Write `data` (text as UTF-8) to `path` whole, or leave `path` as it was.

    `mode`: the file's permission bits (default: the old file's, else 0666 & ~umask)."""
    target = Path(path)
    if target.is_symlink():
        target = Path(os.path.realpath(target))
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise WriteError(target, exc) from exc
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            # a full disk can surface only here on some file systems (NFS, delayed
            # allocation): a file renamed into place before that would be empty
            os.fsync(f.fileno())
        os.chmod(tmp, mode if mode is not None else _mode_for(target))
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise WriteError(target, exc) from exc
        raise


def _mode_for(target: Path) -> int:
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """The process's umask, read without changing it (os.umask sets it while it reads,
    which races with other threads creating files)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022
