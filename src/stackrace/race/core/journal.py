"""The journal of a bench or a tune: every finished level, probe and candidate, on disk
the moment it ends.

    journal = Journal.create(path, JournalStart(command="bench", run=skeleton))
    journal.write(JournalLevel(stack="uvicorn", level=lv, t=12.3))   # fsync'd
    journal.close()                                                   # JournalEnd
    start, entries = read_journal(path)          # `bench --resume`, `tune --resume`

A run that measures for minutes keeps its results in memory until it writes its files
at the end; a `kill -9`, an OOM kill or a lost machine in the middle lost everything.
The journal is the answer: JSON lines, one entry per finished piece of work, each
written whole with one `write` and `fsync`'d before the run goes on, so what is on disk
after any death is every entry that finished (a line cut by the death itself has no
newline and is dropped on reading). One fsync per level or probe (every second or
two) costs nothing a run can see.

The first line (`JournalStart`) says what ran: the command, the run's settings and
stack names as a run file holds them (a `BenchRun` without levels, with its
provenance), and for a capacity search or a tune what they searched for. Resuming
reads it back as `bench --from` reads a run file (commands/bench.py): the stacks are
the stacks file's, resolved by name and compared with the recorded definitions, and a
command, an app or a URL is never taken from the journal: `--app`, `--cmd` and `--url`
must be given again. The entries are typed (msgspec, unknown fields refused) and their
figures checked as a run file's are: a journal is a file someone can hand you.

The file is made beside the run's output (`--json out.json` → `out.json.journal`), or
named with `--journal`; it is never overwritten (a second run with the same output
refuses, naming it, rather than losing a first run's work).

A journal cannot lie (issue 48): a hand-edited one was believed ("-1 req/s", a forged
level at c=777 giving "no breaking point up to c=777", settings naming another stack
measured while the journal's levels were dropped). So:
- the start carries `digest`, the SHA-256 of what it says the run is (command,
  settings, stacks, search): a start edited since is refused in one line, as is one
  without it;
- every entry's figures are checked as a run file's (inputfile.bad_figure: no negative
  count, no NaN), a bench entry must name one of the run's stacks, and a level one of
  its planned levels;
- the writer holds an flock on the file for as long as it writes (`Journal`): a
  journal whose lock is held is a live run's, never resumed (`in_use`) nor cleaned
  away (commands/clean.py);
- the outputs the first run named (`--json`, `--csv`, …) are in the start, so that a
  resume writes every one of them.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
from pathlib import Path

import msgspec

from stackrace.base import inputfile
from stackrace.base.errors import StackraceError
from stackrace.report.schema import (
    SCHEMA_VERSION,
    BenchRun,
    CapacityProbe,
    Level,
)
from stackrace.settings.race_settings import check_values
from stackrace.stacks.validate import name_in_file_problem

JOURNAL_VERSION = 1
SUFFIX = ".journal"
LIMIT = 256 * inputfile.MiB


class TuneSpec(msgspec.Struct, forbid_unknown_fields=True):
    """What a tune searches: the stacks swept (their base names, one per server), each
    one's axes (tunable → values), the seed of its shuffles, its budget."""

    stacks: list[str]
    axes: dict[str, dict[str, list[str]]]
    seed: int
    budget_s: float
    precision: float


class CapacitySpec(msgspec.Struct, forbid_unknown_fields=True):
    budget_s: float | None
    precision: float


class JournalStart(msgspec.Struct, tag="start", tag_field="kind", forbid_unknown_fields=True):
    command: str  # "bench" or "tune"
    run: BenchRun  # settings, stack names, provenance; no levels
    version: int = JOURNAL_VERSION
    capacity: CapacitySpec | None = None
    tune: TuneSpec | None = None
    # the files the run was asked to write, by option ("--markdown": "run.md"): relative
    # to the journal's directory when there, so `--resume` rewrites each of them
    # (commands/runguard.py resume_outputs)
    outputs: dict[str, str] = {}
    digest: str = ""  # settings_digest of the above, written by Journal.create


def settings_digest(start: JournalStart) -> str:
    """The SHA-256 of what a journal's start says the run is: everything but the digest
    itself, in msgspec's canonical order."""
    body = msgspec.structs.replace(start, digest="")
    return hashlib.sha256(msgspec.json.encode(body, order="deterministic")).hexdigest()


class JournalStack(msgspec.Struct, tag="stack", tag_field="kind", forbid_unknown_fields=True):
    """A stack (a candidate) started: its name as measured, its version, its cores."""

    stack: str
    title: str = ""
    family: str = ""
    version: str = ""
    cpus: list[int] | None = None
    t: float = 0.0


class JournalLevel(msgspec.Struct, tag="level", tag_field="kind", forbid_unknown_fields=True):
    stack: str
    level: Level
    t: float = 0.0  # seconds since the run began (its measuring time, across resumes)


class JournalProbe(msgspec.Struct, tag="probe", tag_field="kind", forbid_unknown_fields=True):
    stack: str
    probe: CapacityProbe
    t: float = 0.0


class JournalDone(msgspec.Struct, tag="done", tag_field="kind", forbid_unknown_fields=True):
    """A stack's (a candidate's) part is over: measured, or why not (`error`)."""

    stack: str
    error: str | None = None
    t: float = 0.0


class JournalEnd(msgspec.Struct, tag="end", tag_field="kind", forbid_unknown_fields=True):
    interrupted: str | None = None
    t: float = 0.0


Entry = JournalStack | JournalLevel | JournalProbe | JournalDone | JournalEnd
_ANY = JournalStart | Entry


class JournalError(StackraceError, ValueError):
    """A journal that cannot be used; the message starts with its path."""

    exit_code = 2


def beside(output: str | None) -> Path | None:
    """The journal's default place: beside the run's first output file."""
    return Path(output + SUFFIX).expanduser() if output else None


class Journal:
    """An open journal: append-only, each entry fsync'd."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd
        self._enc = msgspec.json.Encoder()
        self.closed = False
        # why it stopped taking entries ("" while it takes them): a full or failing disk
        # ends the journal, never the run (its figures are still printed and written)
        self.error = ""

    @classmethod
    def create(cls, path: Path, start: JournalStart) -> Journal:
        """A new journal at `path` (refused if one is there: never overwrite a run's
        work); OSError names the cause."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o644)
        journal = cls(path, fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # ours alone: just made (O_EXCL)
            journal._append(msgspec.structs.replace(start, digest=settings_digest(start)))
        except OSError:
            os.close(fd)  # no empty or half journal left behind (a full disk)
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        _fsync_dir(path)
        return journal

    @classmethod
    def reopen(cls, path: Path) -> Journal:
        """The journal of a run being resumed, to append the rest to. A last line cut
        by the death that ended the run is cut off first."""
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise JournalError(_busy(path)) from None
            raise
        size = os.fstat(fd).st_size
        if size:
            data = os.pread(fd, min(size, 1 << 20), max(0, size - (1 << 20)))
            if not data.endswith(b"\n"):
                cut = data.rfind(b"\n")
                os.ftruncate(fd, size - len(data) + cut + 1 if cut >= 0 else 0)
        journal = cls(path, fd)
        return journal

    def _append(self, entry: JournalStart | Entry) -> None:
        line = self._enc.encode(entry) + b"\n"
        written = 0
        while written < len(line):
            written += os.write(self._fd, line[written:])
        os.fsync(self._fd)

    def write(self, entry: Entry) -> None:
        if self.closed:
            return
        try:
            self._append(entry)
        except OSError as exc:
            self.error = f"{exc.strerror or exc} (after {self.path.stat().st_size:,} bytes)"
            self.close()

    def close(self, end: JournalEnd | None = None) -> None:
        if self.closed:
            return
        with contextlib.suppress(OSError):
            if end is not None:
                self._append(end)
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self.closed = True


def _busy(path: Path | str) -> str:
    return (
        f"{path}: its run is still writing it (the journal's lock is held): not resumed; "
        "wait for that run to end, or stop it"
    )


def in_use(path: Path | str) -> bool:
    """Whether a run is writing this journal now (its flock is held: see Journal)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    finally:
        os.close(fd)
    return False


def _fsync_dir(path: Path) -> None:
    """The new file's name on disk too (a crash right after must not lose the file)."""
    with contextlib.suppress(OSError):
        fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def read_journal(path: str) -> tuple[JournalStart, list[Entry]]:
    """The start of a journal and its entries in order; every problem is a
    JournalError naming the file (and the line)."""
    try:
        data = inputfile.read_bytes(path, limit=LIMIT)
    except inputfile.InputFileError as exc:
        raise JournalError(str(exc)) from None
    lines = data.split(b"\n")
    if lines and lines[-1] != b"":
        lines = lines[:-1]  # the last line was cut by the death that ended the run
    lines = [ln for ln in lines if ln.strip()]
    if not lines:
        raise JournalError(f"{path}: empty: not a journal of `stackrace bench` or `tune`")
    dec = msgspec.json.Decoder(_ANY)
    entries: list[Entry] = []
    start: JournalStart | None = None
    for n, line in enumerate(lines, 1):
        try:
            entry = inputfile.parse_json(f"{path}: line {n}", line, dec.decode, typed=True)
        except inputfile.InputFileError as exc:
            raise JournalError(str(exc)) from None
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise JournalError(f"{path}: line {n}: not a journal entry ({exc})") from None
        if n == 1:
            if not isinstance(entry, JournalStart):
                raise JournalError(f"{path}: line 1: not the start of a journal")
            start = entry
            continue
        if isinstance(entry, JournalStart):
            raise JournalError(f"{path}: line {n}: a second start")
        entries.append(entry)
    assert start is not None
    if start.version != JOURNAL_VERSION or start.run.schema != SCHEMA_VERSION:
        raise JournalError(
            f"{path}: journal version {start.version} (run schema {start.run.schema}); this "
            f"stackrace reads {JOURNAL_VERSION} ({SCHEMA_VERSION})"
        )

    try:
        check_values(start.run.settings, f"{path}: settings")
    except ValueError as exc:
        raise JournalError(str(exc)) from None
    if start.command not in ("bench", "tune"):
        raise JournalError(f"{path}: a journal of {start.command!r}, not of bench or tune")
    _check_names(path, start, entries)  # first: a name no run writes, said as such
    if start.digest != settings_digest(start):
        raise JournalError(
            f"{path}: line 1: its settings do not match the digest written with them (edited "
            "since, or written by an older stackrace): not resumed; start a new run"
        )
    _check_entries(path, start, entries)
    if in_use(path):
        raise JournalError(_busy(path))
    return start, entries


def _check_entries(path: str, start: JournalStart, entries: list[Entry]) -> None:
    """Each entry's figures as a run file's (no negative count, no NaN); in a bench's
    journal, each entry of one of the run's stacks and each level one of its plan's."""
    stacks = {st.name for st in start.run.stacks}
    planned = set(start.run.settings.levels)
    for n, e in enumerate(entries, 2):
        bad = inputfile.bad_figure(e)
        if bad:
            raise JournalError(f"{path}: line {n}: {bad}: no measurement gives that")
        if start.command != "bench" or isinstance(e, JournalEnd):
            continue
        if e.stack not in stacks:
            raise JournalError(
                f"{path}: line {n}: stack {e.stack!r} is not one of the run's "
                f"({', '.join(repr(x) for x in sorted(stacks))})"
            )
        if isinstance(e, JournalLevel) and start.capacity is None and e.level.level not in planned:
            raise JournalError(
                f"{path}: line {n}: level {e.level.level} is not one of the run's planned "
                f"levels ({', '.join(str(x) for x in sorted(planned))})"
            )


def _check_names(path: str, start: JournalStart, entries: list[Entry]) -> None:
    """Every stack name the journal holds follows the rule of a name read from a file
    (stackrace.stacks.validate.NAME_IN_FILE): a JournalError naming the file, else."""
    names = [st.name for st in start.run.stacks]
    names += [
        e.stack
        for e in entries
        if isinstance(e, JournalStack | JournalLevel | JournalProbe | JournalDone)
    ]
    bad = next((b for b in map(name_in_file_problem, names) if b), "")
    if bad:
        raise JournalError(f"{path}: {bad}")


class Resumed:
    """What a journal holds, by stack: the levels measured, the probes of its capacity
    search, whether its part was over (and why not measured), the last time written."""

    def __init__(self, entries: list[Entry]) -> None:
        self.levels: dict[str, list[Level]] = {}
        self.probes: dict[str, list[CapacityProbe]] = {}
        self.started: dict[str, JournalStack] = {}
        self.done: dict[str, str | None] = {}
        self.order: list[str] = []  # stacks in the order they first appear
        self.t = 0.0
        self.ended: JournalEnd | None = None
        for e in entries:
            self.t = max(self.t, e.t)
            if isinstance(e, JournalEnd):
                self.ended = e
                continue
            if e.stack not in self.order:
                self.order.append(e.stack)
            if isinstance(e, JournalStack):
                self.started[e.stack] = e
            elif isinstance(e, JournalLevel):
                self.levels.setdefault(e.stack, []).append(e.level)
            elif isinstance(e, JournalProbe):
                self.probes.setdefault(e.stack, []).append(e.probe)
            elif isinstance(e, JournalDone):
                self.done[e.stack] = e.error

    def finished(self, stack: str) -> bool:
        return stack in self.done

    @property
    def work(self) -> int:
        """Levels and probes journalled."""
        return sum(len(v) for v in self.levels.values()) + sum(len(v) for v in self.probes.values())
