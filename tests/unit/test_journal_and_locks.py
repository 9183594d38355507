"""The journal (race/core/journal.py) and the run locks (race/core/runlocks.py), on files alone:
a line cut by a kill, a hostile journal, a dead run's lock, a live one's."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

import msgspec
import pytest

from stackrace.race.core import runlocks
from stackrace.race.core.journal import (
    Journal,
    JournalDone,
    JournalEnd,
    JournalError,
    JournalStart,
    Resumed,
    read_journal,
)
from stackrace.race.core.runlocks import RunInfo, RunLock, other_runs
from stackrace.report.schema import SCHEMA_VERSION, BenchRun, Machine, Settings, StackResult
from stackrace.settings.race_settings import RaceSettings


def skeleton() -> BenchRun:
    s = RaceSettings(stacks=["plain"], slo="p99<50ms")
    return BenchRun(
        schema=SCHEMA_VERSION,
        started="2026-11-27T12:00:00+00:00",
        machine=Machine("h", "cpu", 2, 1 << 30, "6", "Debian", "3.11", "1"),
        settings=Settings(**msgspec.structs.asdict(s), path="/"),
        stacks=[
            StackResult(name=n, title=n, family="sync", version="", levels=[])
            for n in ("plain", "a", "b", "c")
        ],
    )


def test_every_entry_is_on_disk_and_a_cut_last_line_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "run.json.journal"
    j = Journal.create(path, JournalStart(command="bench", run=skeleton()))
    j.write(JournalDone(stack="plain", t=1.5))
    j.close()  # (its writer gone: a journal being written is not read: test_journal_integrity)
    # a kill in the middle of a write: half a line, no newline
    with open(path, "ab") as f:
        f.write(b'{"kind":"done","stack":"pla')
    start, entries = read_journal(str(path))
    assert start.command == "bench" and [type(e) for e in entries] == [JournalDone]
    assert Resumed(entries).done == {"plain": None} and Resumed(entries).t == 1.5
    # reopened to append: the cut line goes first
    again = Journal.reopen(path)
    again.close(JournalEnd(interrupted=None, t=3.0))
    _, entries = read_journal(str(path))
    assert [type(e) for e in entries] == [JournalDone, JournalEnd]


def test_a_full_disk_ends_the_journal_never_the_run(tmp_path: Path) -> None:
    """A write the disk refuses mid-run (ENOSPC, here /dev/full) stops the journal with
    why, keeps what it held, and raises nothing: the run's figures still get printed
    and written (tests/hardening/test_results_kept.py, bench on a full disk)."""
    path = tmp_path / "run.json.journal"
    j = Journal.create(path, JournalStart(command="bench", run=skeleton()))
    j.write(JournalDone(stack="a", t=1.0))
    os.close(j._fd)
    j._fd = os.open("/dev/full", os.O_WRONLY)
    j.write(JournalDone(stack="b", t=2.0))  # no exception
    assert j.closed and j.error.startswith("No space left on device")
    j.write(JournalDone(stack="c", t=3.0))  # ignored once closed
    _, entries = read_journal(str(path))
    assert [e.stack for e in entries if isinstance(e, JournalDone)] == ["a"]


def test_a_journal_is_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "j"
    Journal.create(path, JournalStart(command="bench", run=skeleton())).close()
    with pytest.raises(FileExistsError):
        Journal.create(path, JournalStart(command="bench", run=skeleton()))


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty"),
        ('{"kind":"done","stack":"x"}\n', "not the start"),
        ('{"kind":"start","command":"bench","run":{}}\n', "not a journal entry"),
        ("not json\n", "not a journal entry"),
    ],
)
def test_a_bad_journal_is_one_line_naming_it(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "bad.journal"
    path.write_text(text)
    with pytest.raises(JournalError, match=why) as err:
        read_journal(str(path))
    assert str(err.value).startswith(str(path))


def test_a_journal_with_unknown_fields_or_bad_settings_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j"
    Journal.create(path, JournalStart(command="bench", run=skeleton())).close()
    line = path.read_text().replace('"concurrency_levels":[', '"concurrency_levels":[-5,')
    path.write_text(line + '{"kind":"done","stack":"x","cmd":"rm -rf /"}\n')
    with pytest.raises(JournalError):
        read_journal(str(path))


def test_a_live_runs_lock_is_seen_and_a_dead_ones_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STACKRACE_LOCKS_DIR", str(tmp_path / "locks"))
    mine = RunLock.take("bench", [0, 1])
    assert mine.held and other_runs([0, 1], mine) == []
    # another run: its file, its lock held (here by another open file description)
    live = tmp_path / "locks" / f"4242-abcd{runlocks.SUFFIX}"
    live.write_bytes(msgspec.json.encode(RunInfo(4242, "tune", [0, 1], time.time())))
    fd = os.open(live, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    seen = other_runs([0, 1], mine)
    assert len(seen) == 1 and seen[0].startswith("pid 4242: stackrace tune (since ")
    assert other_runs([5], mine) == []  # not on these cores
    # it dies: the kernel drops its lock; an old file is a dead run's, and goes
    os.close(fd)
    old = time.time() - 60
    os.utime(live, (old, old))
    assert other_runs([0, 1], mine) == [] and not live.exists()
    mine.release()
    assert not any((tmp_path / "locks").iterdir())


def test_a_lock_directory_that_is_not_ours_is_no_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    monkeypatch.setenv("STACKRACE_LOCKS_DIR", str(tmp_path / "link"))
    lock = RunLock.take("bench")
    assert not lock.held and other_runs() == []
