"""Reading a file a user named: one place that says what can go wrong, in one line.

Presets, stacks files, talk scripts, request bodies and run files are named on the
command line or by another file, so any path can arrive: a directory, a FIFO that never
ends, /dev/zero (a MemoryError before this module), a file of another user, a binary.
`read_bytes` reads only a regular file, at most `limit` bytes, and turns every failure
into an `InputFileError` whose message starts with the path:

    presets/x.toml: is a directory
    /dev/zero: not a regular file
    big.json: larger than 64 MiB
    notes.toml: not UTF-8 text (invalid start byte at byte 0)
"""

from __future__ import annotations

import dataclasses
import math
import os
import stat
from typing import BinaryIO

import msgspec

from stackrace.base.errors import StackraceError

MiB = 1 << 20


class InputFileError(StackraceError, ValueError):
    """A named file that cannot be used; the message starts with its path."""


def _size(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB and n % MiB == 0 else f"{n:,} bytes"


def _open_fd(path: str | os.PathLike[str], limit: int) -> int:
    """A blocking descriptor of a regular file of at most `limit` bytes (so far)."""
    where = str(path)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; checked below
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        raise InputFileError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise InputFileError(f"{where}: is a directory") from None
    except OSError as exc:
        raise InputFileError(f"{where}: cannot read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise InputFileError(f"{where}: is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise InputFileError(f"{where}: not a regular file")
        if st.st_size > limit:
            raise InputFileError(f"{where}: larger than {_size(limit)}")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(path: str | os.PathLike[str], limit: int) -> BinaryIO:
    """A regular file of at most `limit` bytes, open to be read in pieces (a recording
    is read line by line: a damaged one is refused at its first bad line, not after
    all of it is in memory). Errors as `read_bytes`'."""
    return os.fdopen(_open_fd(path, limit), "rb")


def read_bytes(path: str | os.PathLike[str], limit: int = 16 * MiB) -> bytes:
    """The content of a regular file of at most `limit` bytes."""
    where = str(path)
    fd = _open_fd(path, limit)
    try:
        chunks = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 16, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:  # it grew while being read
                raise InputFileError(f"{where}: larger than {_size(limit)}")
        return b"".join(chunks)
    except InputFileError:
        raise
    except OSError as exc:
        raise InputFileError(f"{where}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike[str], limit: int = 16 * MiB) -> str:
    """The content of a regular UTF-8 text file of at most `limit` bytes."""
    data = read_bytes(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def bad_figure(obj: object, where: str = "") -> str:
    """The first figure of a decoded file that no measurement gives: a negative number,
    NaN or an infinity ('' when there is none), by its place:
    `stacks[0].levels[2].window.rps = -100.0`. Every count, rate, time, size and share
    a stackrace file holds is finite and at least 0, so a run file, a baseline or a
    recording with such a figure was edited or corrupted: it is refused, never shown
    ("-4,000 req/s" under a green tick) or compared (a baseline's -100 req/s)."""
    if obj is None or isinstance(obj, bool | str | bytes):
        return ""
    if isinstance(obj, int | float):
        return "" if math.isfinite(obj) and obj >= 0 else f"{where or 'a figure'} = {obj!r}"
    if isinstance(obj, msgspec.Struct):
        for name in obj.__struct_fields__:
            found = bad_figure(getattr(obj, name), f"{where}.{name}" if where else name)
            if found:
                return found
        return ""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        # a run file's evidence (stackrace.evidence.model) is dataclasses inside structs
        for f in dataclasses.fields(obj):
            found = bad_figure(getattr(obj, f.name), f"{where}.{f.name}" if where else f.name)
            if found:
                return found
        return ""
    if isinstance(obj, dict):
        for key, value in obj.items():
            found = bad_figure(key, f"{where}[{key!r}]") or bad_figure(value, f"{where}[{key!r}]")
            if found:
                return found
        return ""
    if isinstance(obj, list | tuple):
        for i, value in enumerate(obj):
            found = bad_figure(value, f"{where}[{i}]")
            if found:
                return found
    return ""
