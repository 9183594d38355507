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


def test_nesting_is_measured_outside_strings_and_comments() -> None:
    from stackrace.base.inputfile import MAX_DEPTH, json_depth, parse_json, parse_toml

    assert json_depth(b'{"a": [1, {"b": "' + b"[" * 100 + b'"}]}') == 3
    deep_in_a_string = b'{"a": "' + b"[" * 1000 + b'"}'
    assert parse_json("x.json", deep_in_a_string) == {"a": "[" * 1000}
    too_deep = b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)
    with pytest.raises(InputFileError, match=r"^x\.json: nested deeper than 64 levels"):
        parse_json("x.json", too_deep)
    # TOML: brackets and dots inside strings and comments are text, not nesting
    text = 's = "' + "[" * 200 + '"\nm = """' + "{." * 200 + '"""\n# ' + "[." * 200 + "\n"
    assert parse_toml("t.toml", text)["s"] == "[" * 200
    for deep in ("a" + ".a" * MAX_DEPTH + " = 1\n", "x = " + "[" * 100 + "]" * 100 + "\n"):
        with pytest.raises(InputFileError, match=r"^t\.toml: nested deeper"):
            parse_toml("t.toml", deep)


def test_every_toml_file_shipped_reads_within_the_bound() -> None:
    from stackrace.base.inputfile import toml_too_deep
    from tests.helpers import ROOT

    shipped = [*ROOT.glob("*.toml"), *ROOT.glob("presets/*.toml"), *ROOT.glob("tests/**/*.toml")]
    assert shipped
    assert [p for p in shipped if toml_too_deep(p.read_text())] == []
