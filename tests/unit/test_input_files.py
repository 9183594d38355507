"""Reading a file a user named (stackrace.base.inputfile): every way a path can be wrong
is one line starting with the path, and a figure no measurement gives is found by its
place. Real files, a real FIFO and a real device; nothing is started."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest

from stackrace.base.inputfile import (
    InputFileError,
    MiB,
    bad_figure,
    open_regular,
    read_bytes,
    read_text,
)


def refused(path: str | Path, **kw: int) -> str:
    with pytest.raises(InputFileError) as err:
        read_bytes(path, **kw)
    return str(err.value)


def test_a_regular_file_is_read_whole(tmp_path: Path) -> None:
    f = tmp_path / "stacks.toml"
    f.write_bytes(b"x" * 70_000)  # more than one read's worth
    assert read_bytes(f, limit=70_000) == b"x" * 70_000
    f.write_text("caf\u00e9\n")
    assert read_text(f) == "caf\u00e9\n"
    with open_regular(f, limit=MiB) as lines:
        assert lines.readline() == "caf\u00e9\n".encode()


def test_every_wrong_path_is_one_line_that_starts_with_it(tmp_path: Path) -> None:
    assert refused(tmp_path / "missing.toml") == f"{tmp_path / 'missing.toml'}: no such file"
    assert refused(tmp_path) == f"{tmp_path}: is a directory"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opened without waiting for a writer, then refused
    assert refused(fifo) == f"{fifo}: not a regular file"
    assert refused("/dev/zero") == "/dev/zero: not a regular file"
    big = tmp_path / "big.json"
    big.write_bytes(b"0" * (2 * MiB + 1))
    assert refused(big, limit=2 * MiB) == f"{big}: larger than 2 MiB"
    assert refused(big, limit=1000) == f"{big}: larger than 1,000 bytes"
    binary = tmp_path / "notes.toml"
    binary.write_bytes(b"\xff\xfeab")
    with pytest.raises(InputFileError, match=r"notes.toml: not UTF-8 text \(.* at byte 0\)"):
        read_text(binary)


class Window(msgspec.Struct):
    rps: float
    counts: dict[str, int]


class Level(msgspec.Struct):
    level: int
    window: Window


def test_a_figure_no_measurement_gives_is_named_by_its_place() -> None:
    good = [Level(10, Window(90.5, {"timeout": 0})), Level(100, Window(0.0, {}))]
    assert bad_figure(good, "levels") == ""
    negative = [good[0], Level(100, Window(-100.0, {}))]
    assert bad_figure(negative, "levels") == "levels[1].window.rps = -100.0"
    nan = Level(10, Window(float("nan"), {}))
    assert bad_figure(nan) == "window.rps = nan"
    inf = Level(10, Window(1.0, {"timeout": float("inf")}))  # type: ignore[dict-item]  # corrupt
    assert bad_figure(inf) == "window.counts['timeout'] = inf"
    assert bad_figure({"a": [1, 2, -3]}) == "['a'][2] = -3"
    # words, flags and empty places are no figures
    assert bad_figure({"name": "-1", "ok": False, "p99": None}) == ""
