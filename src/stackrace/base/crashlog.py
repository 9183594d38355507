"""What happens when stackrace itself fails: one line for the user, the details in a file.

A traceback on the terminal is the wrong answer to a user (and a room) for a bug of
ours: it buries the one thing they can act on, and on the app's screen it is cut off.
`record` writes the traceback, the version, the command line and the Python and system
versions to a file of its own (mode 0600: a command line can hold a header with a
token) under the cache directory, and `one_line` says what failed and where the file
is. The exit status is 70 (EX_SOFTWARE from sysexits.h: an internal error), never 0.

Where the cache directory cannot be written (a read-only home, a full disk), the log
goes to the temp directory; where that fails too, the traceback is printed after all,
since it is then the only record. The temp directory is shared with every user of the
machine, so the fallback (`stackrace-crashes-UID`) is used only as a real directory
of ours, mode 0700: one planted there beforehand (a link to somewhere else, another
user's directory, one others can read) is not written into. The directory is opened
once without following links and the file made inside that open directory, so it
cannot be swapped for a link in between.

`STACKRACE_DEBUG=1` also prints the traceback, for those working on stackrace.
"""

from __future__ import annotations

import contextlib
import os
import platform
import stat
import sys
import tempfile
import time
import traceback
from pathlib import Path

from stackrace import __version__
from stackrace.base import madeby, paths

EXIT_INTERNAL = 70  # sysexits.h EX_SOFTWARE
ENV_DEBUG = "STACKRACE_DEBUG"
CRASH_LOGS = "crash logs"  # what the directories' markers say (stackrace.base.madeby)


def _text(exc: BaseException, argv: list[str] | None) -> str:
    head = [
        f"stackrace {__version__} crashed at {time.strftime('%Y-%m-%d %H:%M:%S %z')}",
        f"command: stackrace {' '.join(argv or [])}",
        f"python: {sys.version.split()[0]} ({sys.executable})",
        f"system: {platform.platform()}",
        "",
    ]
    body = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return "\n".join(head) + "".join(body)


def _write_in(directory: Path, text: str, shared: bool = False) -> Path:
    """Write the log in `directory`; `shared`: a directory in the temp dir, which must be
    a real directory owned by this user and closed to others (see the module docstring)."""
    if shared:
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=0o700)
            madeby.mark(directory, CRASH_LOGS)
    else:
        madeby.make_dir(directory, CRASH_LOGS)
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if shared:
            st = os.fstat(dir_fd)
            if st.st_uid != os.getuid():
                raise PermissionError(13, f"{directory} belongs to another user")
            if stat.S_IMODE(st.st_mode) & 0o077:
                os.fchmod(dir_fd, 0o700)  # ours, but opened to others: closed again
        name = f"crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
        # O_EXCL and O_NOFOLLOW: never follow or reuse a file someone else put there
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return directory / name


def fallback_dir() -> Path:
    """The crash logs' place in the temp directory, one per user."""
    return Path(tempfile.gettempdir()) / f"stackrace-crashes-{os.getuid()}"


def record(exc: BaseException, argv: list[str] | None = None) -> Path | None:
    """Write the crash log; its path, or None when no file could be written."""
    text = _text(exc, argv)
    for directory, shared in ((paths.cache_dir() / "crashes", False), (fallback_dir(), True)):
        try:
            return _write_in(directory, text, shared)
        except OSError:
            continue
    return None


def one_line(prog: str, exc: BaseException, log: Path | None) -> str:
    what = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:200]
    where = f"details in {log}" if log else "no crash log could be written"
    return f"{prog}: internal error ({what}); {where}"


def report(prog: str, exc: BaseException, argv: list[str] | None = None) -> int:
    """Record the crash, print one line (and the traceback when it is the only record,
    or STACKRACE_DEBUG is set); the exit status to use."""
    log = record(exc, argv)
    if log is None or os.environ.get(ENV_DEBUG):
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    print(one_line(prog, exc, log), file=sys.stderr)
    return EXIT_INTERNAL
