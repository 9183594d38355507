"""stackrace.base.atomicfile: whole or not at all, with the mode an ordinary write gives."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from stackrace.base.atomicfile import WriteError, write_atomic


def test_a_new_file_gets_the_umask_mode_and_an_old_one_keeps_its_own(tmp_path: Path):
    new = tmp_path / "new.json"
    old_mask = os.umask(0o027)
    try:
        write_atomic(new, "{}")
    finally:
        os.umask(old_mask)
    assert new.read_text() == "{}" and stat.S_IMODE(new.stat().st_mode) == 0o640
    kept = tmp_path / "kept.csv"
    kept.write_text("old")
    kept.chmod(0o600)
    write_atomic(kept, b"new")
    assert kept.read_bytes() == b"new" and stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.csv", "new.json"]


def test_a_link_is_written_through(tmp_path: Path):
    target = tmp_path / "real.md"
    target.write_text("old")
    link = tmp_path / "latest.md"
    link.symlink_to(target)
    write_atomic(link, "new")
    assert link.is_symlink() and target.read_text() == "new"


def test_a_file_that_cannot_be_written_is_named_with_its_cause(tmp_path: Path):
    missing = tmp_path / "no" / "such" / "run.json"
    with pytest.raises(WriteError) as caught:
        write_atomic(missing, "{}")
    assert str(caught.value) == f"{missing}: not written: No such file or directory"
    assert isinstance(caught.value, OSError)
