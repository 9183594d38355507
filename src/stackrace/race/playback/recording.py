"""The recording's file format, and the reader that checks it.

    stackrace --stacks gunicorn-sync,uvicorn --workload io --go --record talk.jsonl.gz
    stackrace replay talk.jsonl.gz            # the same app, the same panes, from the file

A talk must never fail on stage: record the race at home, replay it in the room.

**The file** is JSON lines (gzip'd when the name ends in `.gz`), one record a line, each
with `type` and `t` (seconds since the race started):
- `header` (first): the format version, when, the race settings, whether the figures
  were synthetic, each member (id, name, family, external), and the classic
  experiment a preset replays (its figures and claims: a replay's then-beside-now strip);
- `tick`: every new engine interval: the whole `EngineSnapshot` (each target's last
  interval and running totals, as the engine published them), each member's state and
  resource sample, the ramp's progress label and the talk track's caption;
- `hist`: once a second per target, the running level's latency histogram as sparse
  `[slot, count, …]` pairs in the engine's HdrHistogram layout (the percentile chart,
  exact);
- `command`: every command the session carried out — a slider move (`concurrency`),
  `rate`, `ramp` (start), `ramp_stop`, `ramp_done`;
- `log`: a member's log tail when it crashed;
- `evidence`: an evidence window and its cause, once captured (issue 46's "why").

**Writing** is the live session's (race/live/session_recorder.py `Recorder`, a listener of
the session's); **playback** is race/live/replay.py's. This module knows no session, so
the ghost, which reads recordings, and the session, which shows a ghost, make no circle:
`ReplayEngine` implements the core's `LoadEngine` (its `latest` is the
recorded snapshot at the play position; commands to it are no-ops), `ReplaySource`
hands out `ReplayMember`s whose state and samples are the recorded ones, and
`ReplayPlayer` moves the play position — pause, speed ×¼ to ×16, seek — applying each
record to an ordinary `Session`, so the level log, verdicts, warm-up and summary are
recomputed by the same code as live. Seeking back rebuilds the session from the start
(fast: no UI in between).
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from stackrace.base import inputfile
from stackrace.base.errors import StackraceError
from stackrace.engine.model import EngineSnapshot
from stackrace.report.schema import Then, Why
from stackrace.rules.breaking import LevelVerdict, StepResult
from stackrace.rules.level_log import LevelLog
from stackrace.settings.race_settings import RaceSettings
from stackrace.stacks.sampler import ResourceSample
from stackrace.stacks.signs import ServerSigns
from stackrace.stacks.validate import label_in_file_problem

FORMAT = 1
HIST_EVERY = 1.0  # seconds between histogram records of one target


class RecordingError(StackraceError, ValueError):
    """A recording that cannot be played; the message names the file."""

    exit_code = 2  # input that cannot be used: refused before anything starts


# --- the records ------------------------------------------------------------------------


class MemberInfo(msgspec.Struct):
    id: str
    name: str
    family: str
    external: bool = False
    # its pool, where known (a replay predicts the same knee): stacks.toml's
    workers: int | None = None
    threads: int | None = None


class MemberTick(msgspec.Struct):
    state: str
    resources: ResourceSample | None = None
    signs: ServerSigns | None = None  # its accept queue, log lines, exits (wedge reasons)
    baseline: ResourceSample | None = None  # its memory before load, once, when first known


class Header(msgspec.Struct, tag="header"):
    version: int
    created: str
    settings: RaceSettings
    synthetic: bool = False
    members: list[MemberInfo] = []
    t: float = 0.0
    concurrency: int = 10  # the level the race started at
    rate: float | None = None
    # the classic experiment a preset's race replays: a replay shows its then-beside-now
    # strip as the room saw it live (None: no preset, or a recording made before it)
    then: Then | None = None


class Tick(msgspec.Struct, tag="tick"):
    t: float
    snap: EngineSnapshot | None
    members: dict[str, MemberTick] = {}
    ramp: str | None = None
    caption: str = ""


class Hist(msgspec.Struct, tag="hist"):
    t: float
    target: str
    pairs: list[int]


class Command(msgspec.Struct, tag="command"):
    t: float
    what: str
    value: float | int | None = None


class Log(msgspec.Struct, tag="log"):
    t: float
    member: str
    lines: list[str]


class NewMember(msgspec.Struct, tag="member"):
    t: float
    member: MemberInfo


class View(msgspec.Struct, tag="view"):
    """A key that changed the view: projector, chart, chart_all, summary, close, log,
    focus (`arg`: on/off, or a member id)."""

    t: float
    what: str
    arg: str = ""


class RampResult(msgspec.Struct, tag="ramp_result"):
    """A ramp's findings as the room saw them on its summary: each member's levels and
    breaking point, why it ended, what its clean start did. A replay shows these, not a
    recomputation, so its summary is the live one figure for figure."""

    t: float
    steps: dict[str, list[StepResult]]
    breaking: dict[str, LevelVerdict | None]
    ended: str = ""
    notes: list[str] = []


class EvidenceRecord(msgspec.Struct, tag="evidence"):
    """An evidence window captured live and the cause named from it (report/schema.py
    `Why`): a replay shows the same cause under the verdict, and `w` the same evidence."""

    t: float
    member: str
    why: Why


Record = Header | Tick | Hist | Command | Log | NewMember | View | RampResult | EvidenceRecord
_DECODER = msgspec.json.Decoder(Record)


# --- reading ----------------------------------------------------------------------------


@dataclass
class Recording:
    header: Header
    records: list[Record]  # in time order, header excluded
    path: str = ""
    # the file ends inside a record (the app was killed mid-write): what came before is
    # played, and the replay says it was cut short
    truncated: bool = False

    @property
    def duration(self) -> float:
        return self.records[-1].t if self.records else 0.0

    @property
    def members(self) -> list[MemberInfo]:
        return [r.member for r in self.records if isinstance(r, NewMember)]

    def ticks(self) -> list[Tick]:
        return [r for r in self.records if isinstance(r, Tick)]


# a recording's size on disk, and unpacked (an hour's race of 8 stacks is ~20 MB
# unpacked), one record's line (a tick of many stacks is tens of KB), and its span (a
# week: far beyond any talk; a record later than that is a damaged clock, not a race)
_FILE_LIMIT = 256 * inputfile.MiB
_UNPACKED_LIMIT = 1024 * inputfile.MiB
_LINE_LIMIT = 16 * inputfile.MiB
MAX_SPAN_S = 7 * 24 * 3600.0
_NEGATIVE = re.compile(rb"[:,\[]\s*-\s*[0-9]")


def load_recording(path: str | Path) -> Recording:
    """A recording, read line by line (gzip'd or not) and checked as it is read: every
    problem is a RecordingError naming the file (and the line): not a recording, a
    damaged line, a figure no race gives (negative), a time going back or past a
    week. A file cut short in its last record keeps what came before, marked
    `truncated`."""
    p = Path(path)
    try:
        raw = inputfile.open_regular(p, _FILE_LIMIT)
    except inputfile.InputFileError as exc:
        raise RecordingError(str(exc)) from None
    with raw:
        stream: BinaryIO | gzip.GzipFile = raw
        if raw.read(2) == b"\x1f\x8b":
            raw.seek(0)
            stream = gzip.GzipFile(fileobj=raw)
        else:
            raw.seek(0)
        return _read_records(p, stream)


def _read_records(p: Path, stream: BinaryIO | gzip.GzipFile) -> Recording:
    records: list[Record] = []
    unpacked = 0
    truncated = False
    last_t = 0.0
    n = 0
    while True:
        n += 1
        try:
            line = stream.readline(_LINE_LIMIT + 1)
        except (OSError, EOFError):  # a gzip stream cut short: what came before stays
            truncated = True
            break
        if not line:
            break
        unpacked += len(line)
        if unpacked > _UNPACKED_LIMIT:
            raise RecordingError(f"{p}: unpacks to more than {_UNPACKED_LIMIT >> 20} MiB")
        if len(line) > _LINE_LIMIT:
            raise RecordingError(
                f"{p}: line {n}: longer than {_LINE_LIMIT >> 20} MiB: not a stackrace recording"
            )
        if not line.strip():
            continue
        try:
            record = inputfile.parse_json(f"{p}: line {n}", line, _DECODER.decode, typed=True)
        except inputfile.InputFileError as exc:
            raise RecordingError(str(exc)) from None
        except msgspec.DecodeError as exc:
            if n > 1 and not line.endswith(b"\n"):
                truncated = True  # the last line of a recording cut short
                break
            raise RecordingError(f"{p}: line {n}: not a stackrace recording ({exc})") from None
        if not records and not isinstance(record, Header):
            raise RecordingError(f"{p}: not a stackrace recording (no header)")
        members = (
            record.members
            if isinstance(record, Header)
            else [record.member]
            if isinstance(record, NewMember)
            else []
        )
        bad_name = next((b for b in (label_in_file_problem(m.name) for m in members) if b), "")
        if bad_name:
            raise RecordingError(f"{p}: line {n}: {bad_name}")
        # (JSON holds no NaN or infinity, and a number out of range is a decode error: a
        # figure is bad only when negative, so a line with no "-digit" after ':' ',' '['
        # is not walked: an hour's recording holds millions of figures)
        bad = inputfile.bad_figure(record) if _NEGATIVE.search(line) else ""
        if bad:
            raise RecordingError(
                f"{p}: line {n}: {bad}: not a figure a race records (edited or damaged)"
            )
        if record.t < last_t - 1e-6 or record.t > MAX_SPAN_S:
            why = "goes back in time" if record.t < last_t else "is more than a week in"
            raise RecordingError(
                f"{p}: line {n}: its time {record.t:g} s {why}: not a stackrace recording "
                "(edited or damaged)"
            )
        last_t = max(last_t, record.t)
        records.append(record)
    if not records or not isinstance(records[0], Header):
        raise RecordingError(f"{p}: not a stackrace recording (no header)")
    header = records[0]
    if header.version != FORMAT:
        raise RecordingError(
            f"{p}: recording format {header.version}, this stackrace reads {FORMAT}"
        )
    return Recording(header, records[1:], str(p), truncated)


def recorded_levels(recording: Recording) -> dict[str, tuple[MemberInfo, list[Any]]]:
    """Each member's levels as the level log measured them (for a ghost)."""
    log = LevelLog()
    for r in recording.records:
        if isinstance(r, Tick) and r.snap is not None:
            log.feed(r.snap)
    return {m.id: (m, log.results(m.id)) for m in recording.members}
