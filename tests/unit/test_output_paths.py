"""Output paths are checked before any load (stackrace.report's path checks), in-process."""

from __future__ import annotations

from pathlib import Path

from stackrace.report.write import check_output_paths


def test_output_path_checks(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    assert check_output_paths({"--json": str(tmp_path / "x.json"), "--csv": None}) is None
    assert not (tmp_path / "x.json").exists()  # the check leaves nothing behind
    assert "is a directory" in (check_output_paths({"--json": str(tmp_path)}) or "")
    assert "is not a directory" in (check_output_paths({"--json": str(tmp_path / "file/x")}) or "")
    same = check_output_paths({"--json": str(tmp_path / "a"), "--csv": str(tmp_path / "a")})
    assert same == f"--csv {tmp_path / 'a'}: the same file as --json"
    assert check_output_paths({"--json": str(tmp_path / "file")}) is None  # overwritten later
    assert (tmp_path / "file").exists()
