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

`parse_json` and `parse_toml` bound what a parser is given: a file nested deeper than
`MAX_DEPTH` (`[[[[…]]]]` 100,000 deep is 200 KB) made Python's parsers raise
RecursionError, a crash. Both are measured before they are parsed (brackets outside
strings and comments: a scan at C speed); TOML's dotted keys nest without a bracket
(`a.b.c.… = 1`), and tomllib takes quadratic time on them (10,000 parts: 14 s), so a
key of more than `MAX_DEPTH` parts is refused before parsing too. What is parsed is
measured again without recursion, and a RecursionError of a parser is the same one
line. Nothing stackrace writes or reads nests deeper than ten.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import re
import stat
import tomllib
from collections.abc import Callable
from typing import Any, BinaryIO

import msgspec

from stackrace.base.errors import StackraceError

MiB = 1 << 20
# the deepest nesting of a file read (see the module docstring)
MAX_DEPTH = 64
# a JSON string (its escapes included): the brackets inside one are not nesting
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
# TOML's strings (multi-line first) and comments: their brackets and dots are not syntax
_TOML_TEXT = re.compile(
    r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"|\'[^\'\n]*\'|#[^\n]*'
)
# a dotted key of more than MAX_DEPTH parts (strings already replaced by "")
_DEEP_KEY = re.compile(r"(?:[A-Za-z0-9_\"-]+[ \t]*\.[ \t]*){" + str(MAX_DEPTH) + "}")


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


def _too_deep(where: str) -> InputFileError:
    return InputFileError(
        f"{where}: nested deeper than {MAX_DEPTH} levels: not a file stackrace reads"
    )


def json_depth(data: bytes | str) -> int:
    """How deep the arrays and objects of a JSON text nest, without parsing it: a
    text with at most `MAX_DEPTH` brackets gets their count (a bound, and all that
    matters), any other its depth, brackets inside strings not counted."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return raw.count(b"[") + raw.count(b"{")  # an upper bound, and enough
    brackets = _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    steps = (1 if b in b"[{" else -1 for b in brackets)
    return max(itertools.accumulate(steps, initial=0))


def parse_json(
    where: str,
    data: bytes | str,
    decode: Callable[[Any], Any] | None = None,
    *,
    typed: bool = False,
) -> Any:
    """`decode(data)` (msgspec's untyped decode by default) when `data` nests at most
    `MAX_DEPTH` deep; else, and on a RecursionError, an InputFileError naming `where`.
    The decoder's own errors (msgspec.DecodeError, ValidationError) are the caller's.

    `typed`: `decode` decodes into a type with no field of any type (no `Any`), whose
    own shape bounds how deep a value it accepts (a deeper one is a ValidationError at
    its first bracket): measured only when the decoder refuses it, so that the
    refusal says why. For a recording's every line (the scan costs ~0.3 ms a line of
    4 KB, an hour's recording 4 s; the typed decode of it, a tenth of that)."""
    decoder = decode or msgspec.json.decode
    if not typed:
        if json_depth(data) > MAX_DEPTH:
            raise _too_deep(where)
        try:
            return decoder(data)
        except RecursionError:
            raise _too_deep(where) from None
    try:
        return decoder(data)
    except RecursionError:
        raise _too_deep(where) from None
    except (msgspec.DecodeError, msgspec.ValidationError):
        if json_depth(data) > MAX_DEPTH:
            raise _too_deep(where) from None
        raise


def _depth(obj: object) -> int:
    """How deep lists and dicts nest in `obj`, without recursion (a walk with a stack)."""
    deepest = 0
    todo: list[tuple[object, int]] = [(obj, 0)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, dict | list):
            if depth + 1 > MAX_DEPTH:
                return depth + 1
            deepest = max(deepest, depth + 1)
            values = item.values() if isinstance(item, dict) else item
            todo.extend((v, depth + 1) for v in values)
    return deepest


def toml_too_deep(text: str) -> bool:
    """Whether a TOML text's arrays and inline tables, or a dotted key, nest deeper than
    `MAX_DEPTH`, told without parsing it."""
    if text.count("[") + text.count("{") + text.count(".") <= MAX_DEPTH:
        return False
    syntax = _TOML_TEXT.sub('""', text)
    return json_depth(syntax) > MAX_DEPTH or _DEEP_KEY.search(syntax) is not None


def parse_toml(where: str, text: str) -> dict[str, Any]:
    """`tomllib.loads(text)` when its tables, arrays and keys nest at most `MAX_DEPTH`
    deep; else an InputFileError naming `where` (tomllib.TOMLDecodeError is the
    caller's)."""
    if toml_too_deep(text):
        raise _too_deep(where)
    try:
        doc = tomllib.loads(text)
    except RecursionError:
        raise _too_deep(where) from None
    if _depth(doc) > MAX_DEPTH:
        raise _too_deep(where)
    return doc
