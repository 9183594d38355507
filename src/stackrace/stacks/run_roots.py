"""Where a launcher's stacks keep their files: one run directory per launcher under the
runs directory ($STACKRACE_RUNS_DIR, else runs/ in the cache directory), named by time,
locked while the launcher lives, and the oldest beyond `_KEEP_RUNS` removed, so the logs
of recent runs stay findable and old ones do not pile up.

Only directories `new_run_root` made are ever removed (see its docstring):
$STACKRACE_RUNS_DIR may point anywhere, and nothing else in it is touched.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from stackrace.base import madeby, paths

_KEEP_RUNS = 20  # run directories (logs) kept under runs_dir()


def runs_dir() -> Path:
    """$STACKRACE_RUNS_DIR, else runs/ in the cache directory (stackrace.base.paths:
    ~/.cache/stackrace/runs)."""
    if os.environ.get("STACKRACE_RUNS_DIR"):
        return Path(os.environ["STACKRACE_RUNS_DIR"])
    return paths.cache_dir() / "runs"


# the name `new_run_root` gives: mkdtemp's prefix (a time) and its 8 random characters
_RUN_ROOT_NAME = re.compile(r"^\d{8}-\d{6}-[A-Za-z0-9_]{8}$")
_RUN_ROOT_MARK = ".lock"
# what the markers of the runs directory and of each run directory say (stackrace.base.madeby)
RUNS_MADE_FOR = "run directories (the stacks' logs)"
RUN_MADE_FOR = "one run's stacks: logs, configs, sockets"


def new_run_root(keep: int = _KEEP_RUNS) -> tuple[Path, int]:
    """A new directory for one launcher's stacks, named by time, and a descriptor that
    holds its lock while the launcher lives. The oldest run directories beyond `keep`
    are removed, unless a live launcher still holds them (the lock dies with its
    process), so the logs of recent runs stay findable and old ones do not pile up.

    Only directories this function made are ever removed: named as it names them,
    holding its lock file, not a link, and inside the runs directory once every link
    is resolved. $STACKRACE_RUNS_DIR may point anywhere (a home directory, a shared
    folder): nothing else in it is touched."""
    base = paths.writable_dir(
        runs_dir(), "its run directories", "STACKRACE_RUNS_DIR", made_for=RUNS_MADE_FOR
    )
    try:
        root = Path(tempfile.mkdtemp(prefix=time.strftime("%Y%m%d-%H%M%S-"), dir=base))
        madeby.mark(root, RUN_MADE_FOR)
    except OSError as exc:  # e.g. a full disk
        raise paths.UnwritableDirError(
            f"cannot make a run directory in {base}: {exc.strerror or exc}"
        ) from None
    fd = os.open(root / _RUN_ROOT_MARK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    old = sorted(_own_run_roots(base), key=lambda d: d.stat().st_mtime)
    for d in old[: max(0, len(old) - keep)]:
        try:
            other = os.open(d / _RUN_ROOT_MARK, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError:
            continue
        try:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # in use by a running stackrace
        else:
            shutil.rmtree(d, ignore_errors=True)
        finally:
            os.close(other)
    return root, fd


def in_use(root: Path) -> bool:
    """Whether a live launcher holds this run directory (its lock file's flock is held:
    the lock dies with its process, so a dead run's directory is free)."""
    try:
        fd = os.open(root / _RUN_ROOT_MARK, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def _own_run_roots(base: Path) -> list[Path]:
    """The run directories `new_run_root` made under `base` (see its docstring)."""
    real_base = os.path.realpath(base)
    out = []
    for d in base.iterdir():
        if not _RUN_ROOT_NAME.match(d.name) or d.is_symlink() or not d.is_dir():
            continue
        if os.path.dirname(os.path.realpath(d)) != real_base:
            continue
        mark = d / _RUN_ROOT_MARK
        if mark.is_file() and not mark.is_symlink():
            out.append(d)
    return out
