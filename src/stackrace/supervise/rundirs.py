"""Short run directories: where a stack runs when its place under the runs dir is too long.

Unix socket paths are cut at 107 bytes, so a stack whose directory under the runs dir
would be too long for a socket in it runs in a short directory under the temp dir
(`stackrace-<stack>-XXXX`), linked from its place. When the stack is over, its logs move
back under the runs dir and the short directory goes. The launcher does that on a clean
stop, the watchdog when stackrace dies (even by SIGKILL): nothing is left in the temp dir.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

PREFIX = "stackrace-"


def make_short_dir(stack_base: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{stack_base[:16]}-"))


def is_short_dir(path: Path) -> bool:
    """Only directories this module makes may be folded: a guard for the watchdog, which
    deletes what it is told to."""
    return (
        path.name.startswith(PREFIX)
        and path.parent == Path(tempfile.gettempdir())
        and path.is_dir()
        and not path.is_symlink()
    )


def fold(link: Path, short: Path) -> None:
    """Replace the link with a real directory holding the short dir's logs; delete the
    short dir. Safe to call twice."""
    if link.is_symlink():
        link.unlink()
        link.mkdir(exist_ok=True)
    if not is_short_dir(short):
        return
    if link.is_dir():
        for log in [*short.glob("*.log"), short / "log.txt"]:
            with contextlib.suppress(OSError):
                shutil.move(str(log), link / log.name)
    shutil.rmtree(short, ignore_errors=True)
