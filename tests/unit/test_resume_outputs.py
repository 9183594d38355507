"""`--resume` writes again every file the first run wrote (commands/runguard.py
record_outputs, resume_outputs), and a journal's word alone writes nowhere but beside
it: a journal is a file someone can hand you. (The whole path, a bench and a tune
interrupted then resumed: tests/integration/test_journal.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from stackrace.commands.output_args import OutputFiles
from stackrace.commands.runguard import record_outputs, resume_outputs


def bench_args(**given: str | None) -> OutputFiles:
    return OutputFiles(**given)  # type: ignore[arg-type]  # only the files' fields


def test_the_journal_keeps_each_output_from_its_own_directory(tmp_path: Path) -> None:
    elsewhere = tmp_path.parent / "elsewhere.svg"
    args = bench_args(
        json_out=str(tmp_path / "run.json"),
        md_out=str(tmp_path / "reports" / "run.md"),
        chart_out=str(elsewhere),
    )
    kept = record_outputs(tmp_path / "run.json.journal", args)
    assert kept == {
        "--json": "run.json",
        "--markdown": str(Path("reports") / "run.md"),
        "--chart": str(elsewhere.resolve()),
    }


def test_a_resume_writes_the_first_runs_files_the_command_line_first(tmp_path: Path) -> None:
    journal = tmp_path / "j.journal"
    recorded = {"--json": "run.json", "--markdown": "reports/run.md", "--csv": "run.csv"}
    args = bench_args(csv_out="mine.csv")  # given again: the command line wins
    args = resume_outputs("stackrace bench", str(journal), recorded, args)
    assert args.json_out == str(tmp_path / "run.json")
    assert args.md_out == str(tmp_path / "reports" / "run.md")
    assert args.csv_out == "mine.csv"


def test_an_old_journal_beside_its_json_still_names_it(tmp_path: Path) -> None:
    args = bench_args()
    args = resume_outputs("stackrace tune", str(tmp_path / "t.json.journal"), {}, args)
    assert args.json_out == str(tmp_path / "t.json")


@pytest.mark.parametrize("name", ["/etc/passwd", "../run.md", "a/../../run.md"])
def test_a_journal_cannot_name_a_file_outside_its_directory(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = bench_args()
    args = resume_outputs(
        "stackrace bench", str(tmp_path / "j.journal"), {"--markdown": name}, args
    )
    assert args.md_out is None
    said = capsys.readouterr().err
    assert "not written again on the journal's word; give --markdown" in said, said


def test_an_output_another_command_has_not_is_left(tmp_path: Path) -> None:
    tune = OutputFiles(offered=frozenset({"json_out", "md_out", "chart_out"}))  # no --csv
    got = resume_outputs("stackrace tune", str(tmp_path / "j.journal"), {"--csv": "run.csv"}, tune)
    assert got.csv_out is None
