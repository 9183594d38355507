"""Which directories stackrace made: a marker file in each, so that `clean` removes those
and nothing else.

A name is not proof. `~/.cache/stackrace/runs` or `data/apps` may hold what a user put
there (with `STACKRACE_HOME=~` that is `~/data/apps`), and a directory of that name may
have been there before stackrace ever ran. So every directory stackrace creates for its
own files gets a small file, `.stackrace-made`, written right after the directory was
created by this process (never into a directory that was already there): what the
directory is for and a random id. `stackrace clean` removes a directory only when it
holds that marker, as a regular file owned by this user, in a real directory (not a
link) owned by this user; everything else is listed and left alone.

A marker records what it marks: the directory's real path, device and inode when it was
marked, besides a random id. `made(path)` believes a marker only in the directory it
was written in: a marker copied along with a directory (`cp -r` of a run directory, a
backup restored) sits in a directory of another inode, and one moved along (`mv`) at
another path, so the copy or the moved directory is not stackrace's to delete; it is
the user's now. A marker without that record (written by an older stackrace) is no
proof either, and its directory is left alone, as an unmarked one is. The content is
JSON, read with a size limit: a marker is never trusted for more than "stackrace made
this directory, here".
"""

from __future__ import annotations

import contextlib
import os
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path

import msgspec

MARKER = ".stackrace-made"
_MAX_BYTES = 4096


class _Marker(msgspec.Struct):
    made_by: str
    what: str
    id: str
    # the directory it marks: its real path, device and inode when it was marked (0 and
    # "": an older marker, proof of nothing)
    path: str = ""
    dev: int = 0
    ino: int = 0


@dataclass(frozen=True)
class Made:
    """What a directory's marker says."""

    what: str
    id: str


def make_dir(path: Path, what: str, mode: int = 0o777) -> bool:
    """Create `path` (its parents as needed, unmarked: they may be the user's) and mark
    it as made by stackrace when this call created it; True when it did. A directory
    already there is left as it is (and unmarked, unless stackrace marked it before)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir(mode=mode)
    except FileExistsError:
        return False
    mark(path, what)
    return True


def mark(path: Path, what: str) -> None:
    """Write the marker into a directory this process has just created. Never follows a
    link and never replaces a marker (O_EXCL): a second call is harmless."""
    st = os.lstat(path)
    body = msgspec.json.encode(
        _Marker("stackrace", what, uuid.uuid4().hex, os.path.realpath(path), st.st_dev, st.st_ino)
    )
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path / MARKER, flags, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "wb") as f:
        f.write(body + b"\n")


def made(path: Path, handed_over: bool = False) -> Made | None:
    """What stackrace made `path` for, or None when nothing says it did: `path` is not a
    real directory owned by this user, or its marker is missing, a link, someone
    else's, or not a marker, or a marker of another directory (copied or moved here:
    see the module docstring). `handed_over`: the directory may belong to another account
    that stackrace gave it to (the private MariaDB's server files, owned by `mysql`);
    the marker must still be this user's."""
    uid = os.getuid()
    try:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or (st.st_uid != uid and not handed_over):
            return None
        fd = os.open(path / MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        mst = os.fstat(fd)
        if not stat.S_ISREG(mst.st_mode) or mst.st_uid != uid or mst.st_size > _MAX_BYTES:
            return None
        data = os.read(fd, _MAX_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
        marker = msgspec.json.decode(data, type=_Marker)
        here = (os.path.realpath(path), st.st_dev, st.st_ino)
        if (
            marker.made_by == "stackrace"
            and marker.id
            and (marker.path, marker.dev, marker.ino) == here
        ):
            return Made(marker.what, marker.id)
    return None
