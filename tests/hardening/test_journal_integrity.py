"""A journal cannot lie (issue 48, item 5). On files and processes alone: a journal
edited since it was written (its settings' digest), a negative figure, a level the
plan never had, a stack not of the run, a journal a live run still writes (its flock),
the closing line after the disk filled (a real RLIMIT_FSIZE), the outputs a resume
must write again, an interrupted capacity search's JSON, the first of two runs sharing
cores (it records the second), and what `clean` does beside a live run and with its
journals, and with a copied run directory. The bench runs end to end are in
tests/integration/test_journal.py and tests/hardening/test_journal_resume.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import msgspec
import pytest

from stackrace.base import madeby
from stackrace.commands import runguard
from stackrace.commands.output_args import OutputFiles
from stackrace.race.core import runlocks
from stackrace.race.core.capacity_plan import interrupted
from stackrace.race.core.journal import (
    Journal,
    JournalDone,
    JournalError,
    JournalLevel,
    JournalStart,
    in_use,
    read_journal,
)
from stackrace.report.schema import (
    SCHEMA_VERSION,
    BenchRun,
    CapacityProbe,
    CapacityResult,
    Machine,
    Settings,
    StackResult,
)
from stackrace.settings.race_settings import RaceSettings
from stackrace.stacks.run_roots import new_run_root
from tests.hardening.test_package_tidy import clean_env, run_alone
from tests.unit.test_report import level


def skeleton(levels: tuple[int, ...] = (2, 4)) -> BenchRun:
    s = RaceSettings(stacks=["plain"], concurrency_levels=list(levels))
    return BenchRun(
        schema=SCHEMA_VERSION,
        started="2026-11-29T12:00:00+00:00",
        machine=Machine("h", "cpu", 2, 1 << 30, "6", "Debian", "3.11", "1"),
        settings=Settings(**msgspec.structs.asdict(s), path="/"),
        stacks=[StackResult(name="plain", title="plain", family="sync", version="", levels=[])],
    )


def _journal(tmp_path: Path, **start: object) -> Path:
    path = tmp_path / "run.json.journal"
    j = Journal.create(path, JournalStart(command="bench", run=skeleton(), **start))  # type: ignore[arg-type]
    j.write(JournalLevel(stack="plain", level=level(2, 100.0, 5_000), t=1.0))
    j.close()
    return path


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _rewrite(path: Path, lines: list[dict]) -> None:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_a_journal_as_written_is_read(tmp_path: Path) -> None:
    start, entries = read_journal(str(_journal(tmp_path)))
    assert start.digest and len(entries) == 1


def test_settings_edited_since_are_refused_by_their_digest(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    lines = _lines(path)
    lines[0]["run"]["settings"]["stacks"] = ["other"]  # "measure another stack"
    lines[0]["run"]["stacks"][0]["name"] = "other"
    _rewrite(path, lines)
    with pytest.raises(JournalError, match="line 1: its settings do not match the digest"):
        read_journal(str(path))
    lines[0].pop("digest")  # an older journal, or the digest removed: no proof either
    _rewrite(path, lines)
    with pytest.raises(JournalError, match="digest"):
        read_journal(str(path))


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda e: e["level"]["window"].__setitem__("rps", -1.0), "level.window.rps = -1.0"),
        (lambda e: e["level"].__setitem__("concurrency", 777), "level 777 is not one of the run's"),
        (lambda e: e.__setitem__("stack", "forged"), "stack 'forged' is not one of the run's"),
        (lambda e: e.__setitem__("t", -5), "t = -5"),
    ],
    ids=["negative-rps", "level-not-planned", "stack-not-of-the-run", "negative-time"],
)
def test_an_entry_is_checked_as_a_run_files_figures_and_against_the_plan(
    tmp_path: Path, edit, said: str
) -> None:
    path = _journal(tmp_path)
    lines = _lines(path)
    edit(lines[1])
    _rewrite(path, lines)
    with pytest.raises(JournalError, match="line 2: ") as err:
        read_journal(str(path))
    assert said in str(err.value) and str(err.value).startswith(str(path))


def test_a_journal_its_run_still_writes_is_not_resumed(tmp_path: Path) -> None:
    path = tmp_path / "live.journal"
    live = Journal.create(path, JournalStart(command="bench", run=skeleton()))
    live.write(JournalDone(stack="plain", t=1.0))
    assert in_use(path)
    with pytest.raises(JournalError, match="its run is still writing it"):
        read_journal(str(path))
    with pytest.raises(JournalError, match="its run is still writing it"):
        Journal.reopen(path)
    live.close()  # the run ended (or died: the kernel drops the lock)
    assert not in_use(path)
    read_journal(str(path))


def test_after_a_full_disk_the_closing_line_says_what_the_journal_lost(tmp_path: Path) -> None:
    """A real file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored: the write fails EFBIG, as
    on a full disk) in a child process: the journal stops, and the line a run prints
    says the journal holds only what came before."""
    path = tmp_path / "full.journal"
    script = textwrap.dedent(
        f"""
        import resource, signal, sys
        sys.path[:0] = {sys.path[:3]!r}
        from pathlib import Path
        from stackrace.commands import runguard
        from stackrace.race.core.journal import Journal, JournalLevel, JournalStart
        from tests.hardening.test_journal_integrity import skeleton
        from tests.unit.test_report import level
        j = Journal.create(Path({str(path)!r}), JournalStart(command="bench", run=skeleton()))
        size = Path({str(path)!r}).stat().st_size
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 100, size + 100))
        j.write(JournalLevel(stack="plain", level=level(2, 100.0, 5_000), t=1.0))
        print(runguard.kept_line("stackrace bench", j, {str(path)!r}, "level and probe"))
        """
    )
    r = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parents[2],
        check=False,
    )
    assert r.returncode == 0, r.stderr
    line = r.stdout.strip()
    assert (
        "holds only the level and probe measured before the journal stopped (File too large" in line
    )
    assert "every finished" not in line
    _start, entries = read_journal(str(path))  # the cut line dropped: the start alone
    assert entries == []


def test_a_resume_writes_every_output_the_first_run_named(tmp_path: Path) -> None:
    first = OutputFiles(
        json_out=None,
        csv_out=str(tmp_path / "out.csv"),
        md_out=str(tmp_path / "r.md"),
        chart_out="/elsewhere/chart.svg",
        junit_out="-",
    )
    where = tmp_path / "out.journal"
    named = runguard.record_outputs(where, first)
    # beside the journal by their path from there; another by its whole path; "-" none
    assert named == {"--csv": "out.csv", "--markdown": "r.md", "--chart": "/elsewhere/chart.svg"}
    path = _journal(tmp_path, outputs=named)
    start, _ = read_journal(str(path))
    again = OutputFiles(md_out="mine.md")
    again = runguard.resume_outputs("stackrace bench", str(path), start.outputs, again)
    assert again.csv_out == str(tmp_path / "out.csv")  # dropped before: the first run's --csv
    assert again.md_out == "mine.md"  # given again: the resume's own
    assert again.chart_out is None  # not beside the journal: not on the journal's word


def test_an_interrupted_search_claims_no_capacity_in_its_json() -> None:
    lv = level(8, 400.0, 20_000)
    probe = CapacityProbe(
        load=8, meets=True, why="", phase="bracket", answers=2000, enough=True, seconds=1.0,
        figures={"p99": 20_000.0}, level=lv,
    )  # fmt: skip
    c = CapacityResult(
        slo="p99 < 50 ms", mode="concurrency", load=8, capacity=400.0, margin=0.05,
        breaks_at=None, breaks_why="", stopped="", sentence="", needed_answers=1000,
        precision=0.1, rss=1 << 20, cpu_us_per_request=300.0, probes=[probe],
    )  # fmt: skip
    cut = interrupted(c)
    doc = json.loads(msgspec.json.encode(cut))
    assert doc["capacity"] is None and doc["margin"] is None
    assert doc["cpu_us_per_request"] is None and doc["rss"] == 0
    assert "no capacity claimed" in doc["sentence"] and len(doc["probes"]) == 1


def test_the_first_of_two_runs_sharing_cores_records_the_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STACKRACE_LOCKS_DIR", str(tmp_path / "locks"))
    first = runlocks.RunLock.take("bench", [0, 1])
    shared: list[str] = []
    assert runguard.late_sharers(first, shared) == []
    # the second run: another process (its lock held by another open file description)
    code = textwrap.dedent(
        f"""
        import os, sys, time
        sys.path[:0] = {sys.path[:3]!r}
        from stackrace.race.core.runlocks import RunLock
        lock = RunLock.take("tune", [1])
        print("ready", flush=True)
        sys.stdin.readline()
        """
    )
    env = {**os.environ, "STACKRACE_LOCKS_DIR": str(tmp_path / "locks")}
    second = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert second.stdout is not None and second.stdout.readline() == "ready\n"
        late = runguard.late_sharers(first, shared)
        assert len(late) == 1 and late[0].startswith(f"pid {second.pid}: stackrace tune ")
        assert shared == late and runguard.late_sharers(first, shared) == []  # once
    finally:
        second.communicate("\n", timeout=30)
    mine = first.path
    assert mine is not None
    first.release()
    assert not mine.exists() and not Path(f"{mine}{runlocks.JOINED}").exists()


def test_a_copied_or_moved_directory_is_not_cleans(tmp_path: Path) -> None:
    made = tmp_path / "made"
    assert madeby.make_dir(made, "a test's")
    assert madeby.made(made) is not None
    copy = tmp_path / "copy"
    shutil.copytree(made, copy)  # the marker goes along: a file like any other
    assert madeby.made(copy) is None
    moved = tmp_path / "moved"
    made.rename(moved)
    assert madeby.made(moved) is None
    old = tmp_path / "old"  # a marker without what it marks (an older stackrace's)
    old.mkdir()
    (old / madeby.MARKER).write_text('{"made_by":"stackrace","what":"x","id":"abc"}\n')
    assert madeby.made(old) is None


def test_clean_spares_a_live_runs_directory_and_journal_and_names_its_journals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("STACKRACE_HOME", str(home))
    monkeypatch.delenv("STACKRACE_RUNS_DIR", raising=False)
    live_root, live_fd = new_run_root()  # a launcher's, still running: its lock held
    dead_root, dead_fd = new_run_root()
    os.close(dead_fd)
    where = runguard.journal_path(None, [], "bench")  # cache/journals, marked
    live = Journal.create(where, JournalStart(command="bench", run=skeleton()))
    ended = where.with_name("bench-ended.journal")
    Journal.create(ended, JournalStart(command="bench", run=skeleton())).close()
    copied = home / "cache" / "runs" / "20260101-000000-abcdefgh"
    shutil.copytree(dead_root, copied)  # a copy: its marker is the original's
    try:
        env = clean_env(STACKRACE_HOME=str(home), HOME=str(tmp_path))
        r = run_alone(env, "clean")
        said = r.stdout
        assert r.returncode == 0, said + r.stderr
        assert "not made by stackrace" not in next(x for x in said.splitlines() if "journals" in x)
        for kept in (live_root, where):
            line = next(x for x in said.splitlines() if str(kept) in x)
            assert "a live run's (its lock is held): left alone" in line, line
        assert live_root.is_dir() and (live_root / ".lock").exists() and where.exists()
        assert not dead_root.exists() and not ended.exists()
        assert copied.is_dir(), "a copied run directory was clean's to delete"
        line = next(x for x in said.splitlines() if str(copied) in x)
        assert "left alone" in line, line
    finally:
        live.close()
        os.close(live_fd)
