"""Record a race, and play it back with no servers and no engine.

    stackrace --stacks gunicorn-sync,uvicorn --workload io --go --record talk.jsonl.gz
    stackrace replay talk.jsonl.gz            # the same app, the same panes, from the file

A talk must never fail on stage: record the race at home, replay it in the room.

**The file** is JSON lines (gzip'd when the name ends in `.gz`), one record a line, each
with `type` and `t` (seconds since the race started):
- `header` (first): the format version, when, the race settings, whether the figures
  were synthetic, and each member (id, name, family, external);
- `tick`: every new engine interval: the whole `EngineSnapshot` (each target's last
  interval and running totals, as the engine published them), each member's state and
  resource sample, the ramp's progress label and the talk track's caption;
- `hist`: once a second per target, the running level's latency histogram as sparse
  `[slot, count, …]` pairs in the engine's HdrHistogram layout (the percentile chart,
  exact);
- `command`: every command the session carried out — a slider move (`concurrency`),
  `rate`, `ramp` (start), `ramp_stop`, `ramp_done`;
- `log`: a member's log tail when it crashed.

**Playback**: `ReplayEngine` implements the core's `LoadEngine` (its `latest` is the
recorded snapshot at the play position; commands to it are no-ops), `ReplaySource`
hands out `ReplayMember`s whose state and samples are the recorded ones, and
`ReplayPlayer` moves the play position — pause, speed ×¼ to ×16, seek — applying each
record to an ordinary `Session`, so the level log, verdicts, warm-up and summary are
recomputed by the same code as live. Seeking back rebuilds the session from the start
(fast: no UI in between).
"""

from __future__ import annotations

import gzip
import io
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import msgspec

from stackrace import inputfile
from stackrace.engine.histogram import LatencyHistogram, SparseHistogram
from stackrace.engine.model import EngineSnapshot, TargetSpec
from stackrace.race.core import RaceCore, StackChoice, StackState
from stackrace.race.session import RacePlan, Session, SessionView
from stackrace.race_settings import RaceSettings
from stackrace.ramp import StepResult, Verdict
from stackrace.stacks.listen import ListenState
from stackrace.stacks.sampler import ResourceSample
from stackrace.stacks.signs import ServerSigns

FORMAT = 1
HIST_EVERY = 1.0  # seconds between histogram records of one target


class RecordingError(ValueError):
    pass


# --- the records ------------------------------------------------------------------------


class MemberInfo(msgspec.Struct):
    id: str
    name: str
    family: str
    external: bool = False


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
    breaking: dict[str, Verdict | None]
    ended: str = ""
    notes: list[str] = []


Record = Header | Tick | Hist | Command | Log | NewMember | View | RampResult
_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(Record)


def _open_write(path: Path) -> IO[bytes]:
    if path.suffix == ".gz":
        return gzip.open(path, "wb", compresslevel=5)  # type: ignore[return-value]  # GzipFile is IO[bytes]
    return open(path, "wb")


# --- recording --------------------------------------------------------------------------


class Recorder:
    """A SessionListener that writes every command and interval of the race to a file."""

    def __init__(self, path: str | Path, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = Path(path)
        self.clock = clock
        self._file: IO[bytes] | None = None
        self._t0: float | None = None
        self._last_seq = -1
        self._hist_at: dict[str, float] = {}
        self._members: set[str] = set()
        self._crashed: set[str] = set()
        self._baselines: set[str] = set()
        self.records = 0

    def _t(self) -> float:
        now = self.clock()
        if self._t0 is None:
            self._t0 = now
        return round(now - self._t0, 3)

    def _write(self, record: Record) -> None:
        if self._file is None:
            return
        self._file.write(_ENCODER.encode(record) + b"\n")
        self.records += 1

    def _start(self, session: Session) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = _open_write(self.path)
        self._write(
            Header(
                version=FORMAT,
                created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                settings=session.core.settings,
                synthetic=session.synthetic,
                t=self._t(),
                concurrency=session.core.concurrency,
                rate=session.core.rate,
            )
        )

    def command(self, session: Session, what: str, value: object) -> None:
        if self._file is None:
            self._start(session)
        v = value if isinstance(value, int | float) or value is None else None
        self._write(Command(self._t(), what, v))
        if what in ("ramp_done", "ramp_stop") and session.ramp_steps:
            self._write(
                RampResult(
                    self._t(),
                    {k: list(v) for k, v in session.ramp_steps.items()},
                    dict(session.ramp_breaking),
                    session.ramp_end,
                    list(session.ramp_notes),
                )
            )

    def view(self, session: Session, what: str, arg: str) -> None:
        if self._file is None:
            self._start(session)
        self._write(View(self._t(), what, arg))

    def tick(self, session: Session, view: SessionView) -> None:
        if self._file is None:
            self._start(session)
        snap = session.core.engine.latest
        seq = snap.seq if snap is not None else -1
        core = session.core
        for mid, m in core.members.items():
            if mid not in self._members:
                self._members.add(mid)
                h = m.handle
                self._write(NewMember(self._t(), MemberInfo(mid, h.name, h.family, h.external)))
        if seq == self._last_seq:
            return
        self._last_seq = seq
        t = self._t()
        members = {}
        for pv in view.panes:
            m = core.members[pv.id]
            baseline = None
            if m.baseline is not None and pv.id not in self._baselines:
                self._baselines.add(pv.id)
                baseline = m.baseline
            members[pv.id] = MemberTick(str(m.handle.state), m.resources, m.signs, baseline)
            if pv.state == StackState.CRASHED and pv.id not in self._crashed:
                self._crashed.add(pv.id)
                self._write(Log(t, pv.id, list(m.handle.log_tail(40))))
        self._write(Tick(t, snap, members, view.ramp, view.caption))
        for tid in core.attached():
            if t - self._hist_at.get(tid, -HIST_EVERY) >= HIST_EVERY:
                self._hist_at[tid] = t
                try:
                    hist = core.engine.total_histogram(tid)
                except KeyError:
                    continue
                idx = hist.nonzero()
                counts = hist.counts
                pairs = [x for i in idx for x in (i, counts[i])]
                self._write(Hist(t, tid, pairs))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


# --- reading ----------------------------------------------------------------------------


@dataclass
class Recording:
    header: Header
    records: list[Record]  # in time order, header excluded
    path: str = ""

    @property
    def duration(self) -> float:
        return self.records[-1].t if self.records else 0.0

    @property
    def members(self) -> list[MemberInfo]:
        return [r.member for r in self.records if isinstance(r, NewMember)]

    def ticks(self) -> list[Tick]:
        return [r for r in self.records if isinstance(r, Tick)]


def load_recording(path: str | Path) -> Recording:
    p = Path(path)
    try:
        raw = inputfile.read_bytes(p, limit=_FILE_LIMIT)
    except inputfile.InputFileError as exc:
        raise RecordingError(str(exc)) from None
    if raw[:2] == b"\x1f\x8b":
        # read in pieces, to a bound: a recording cut short (the app was killed) keeps
        # what was written, and a small file that unpacks to gigabytes is refused
        raw, whole = _gunzip(raw, _UNPACKED_LIMIT)
        if not whole:
            raise RecordingError(f"{p}: unpacks to more than {_UNPACKED_LIMIT >> 20} MiB")
    records: list[Record] = []
    for n, line in enumerate(io.BytesIO(raw), 1):
        if not line.strip():
            continue
        try:
            records.append(_DECODER.decode(line))
        except msgspec.DecodeError as exc:
            if n > 1 and not line.endswith(b"\n"):
                break  # the last line of a recording cut short
            raise RecordingError(f"{p}: line {n}: not a stackrace recording ({exc})") from None
    if not records or not isinstance(records[0], Header):
        raise RecordingError(f"{p}: not a stackrace recording (no header)")
    header = records[0]
    if header.version != FORMAT:
        raise RecordingError(
            f"{p}: recording format {header.version}, this stackrace reads {FORMAT}"
        )
    return Recording(header, records[1:], str(p))


# a recording's size on disk, and unpacked (an hour's race of 8 stacks is ~20 MB unpacked)
_FILE_LIMIT = 256 * inputfile.MiB
_UNPACKED_LIMIT = 1024 * inputfile.MiB


def _gunzip(raw: bytes, limit: int) -> tuple[bytes, bool]:
    """What a gzip stream unpacks to, up to `limit` bytes, and False when it holds more.
    A stream cut short gives what came before the cut."""
    d = gzip.GzipFile(fileobj=io.BytesIO(raw))
    out = bytearray()
    try:
        while chunk := d.read(65536):
            out += chunk
            if len(out) > limit:
                return b"", False
    except (OSError, EOFError):
        pass
    return bytes(out), True


# --- playback ---------------------------------------------------------------------------


class ReplayEngine:
    """The LoadEngine protocol over a recording: figures come from the play position."""

    synthetic = False  # set from the header

    def __init__(self) -> None:
        self.latest: EngineSnapshot | None = None
        self.errors: list[str] = []
        self.hists: dict[str, SparseHistogram] = {}

    async def start(self) -> None:
        """Nothing to start: the recording is the engine."""

    async def stop(self) -> EngineSnapshot | None:
        return self.latest

    async def add_target(
        self, spec: TargetSpec, cpus: Sequence[int] | None = None, procs: int | None = None
    ) -> None:
        """Targets come from the recording."""

    async def remove_target(self, target_id: str) -> None:
        """Targets come from the recording."""

    async def set_concurrency(self, n: int, target_id: str | None = None) -> None:
        """The recording decides the load."""

    async def set_rate(self, rate: float | None, target_id: str | None = None) -> None:
        """The recording decides the load."""

    async def set_budget(self, n: int | None, target_id: str | None = None) -> None:
        """The recording decides the load."""

    def reset_totals(self, warmup: float = 0.0, target_id: str | None = None) -> None:
        """The recorded totals were reset when the race ran."""

    def total_histogram(self, target_id: str, uncorrected: bool = False) -> LatencyHistogram:
        return self.hists.get(target_id, SparseHistogram()).to_dense()

    def total_percentiles(
        self, target_id: str, points: Sequence[float], uncorrected: bool = False
    ) -> list[int]:
        return self.hists.get(target_id, SparseHistogram()).percentiles(points)


@dataclass
class ReplayMember:
    """A MemberHandle whose state and samples are the recorded ones."""

    info: MemberInfo
    state: StackState = StackState.STARTING
    resources: ResourceSample | None = None
    log: list[str] = field(default_factory=list)
    recorded_signs: ServerSigns | None = None

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def family(self) -> str:
        return self.info.family

    @property
    def external(self) -> bool:
        return self.info.external

    @property
    def base_url(self) -> str:
        return ""

    @property
    def cacert(self) -> str | None:
        return None

    def log_tail(self, lines: int = 20) -> list[str]:
        return (self.log or ["(replay: no log was recorded)"])[-lines:]

    def sample(self) -> ResourceSample | None:
        return self.resources

    listen_port = None  # nothing runs: the recorded signs are replayed
    error = None  # a replay starts nothing

    def signs(self, now: float, listen: ListenState | None) -> ServerSigns | None:
        return self.recorded_signs

    async def stop(self) -> None:
        """Nothing runs."""


class ReplaySource:
    def __init__(self, members: Sequence[MemberInfo]) -> None:
        self.members = {m.id: ReplayMember(m) for m in members}

    def catalog(self) -> list[StackChoice]:
        return [StackChoice(m.id, m.name, m.family) for m in self.members.values()]

    def start(self, stack_id: str, cpus: list[int] | None) -> ReplayMember:
        return self.members[stack_id]

    def host_lost(self) -> str:
        return ""  # a replay: no host to lose

    async def start_database(self) -> None:
        """A replay needs no database."""

    def database_state(self) -> str:
        return ""  # the recorded verdicts say whether the database was fine

    async def close(self) -> None:
        """Nothing runs."""


SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)


class ReplayPlayer:
    """Moves the play position and applies the records up to it to the session."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self.engine = ReplayEngine()
        self.engine.synthetic = recording.header.synthetic
        self.source = ReplaySource(recording.members)
        self.position = 0.0
        self.speed = 1.0
        self.paused = False
        self._next = 0  # index of the next record to apply
        core = RaceCore(
            self.engine,
            self.source,
            recording.header.settings,
            clock=self.clock,
            sample_every=0.0,
            signs_every=0.0,
        )
        self.session = Session(core)
        self.plan = RacePlan(stacks=tuple(self.source.members), settings=recording.header.settings)

    def clock(self) -> float:
        return self.position

    @property
    def duration(self) -> float:
        return self.recording.duration

    @property
    def ended(self) -> bool:
        return self._next >= len(self.recording.records)

    async def start(self) -> None:
        """Start the session over the recorded members (call once, then `advance`)."""
        h = self.recording.header
        self.plan = RacePlan(
            stacks=tuple(self.source.members),
            settings=h.settings,
            concurrency=h.concurrency,
            rate=h.rate,
        )
        await self.session.start(self.plan)
        self._status()

    async def advance(self, wall_seconds: float) -> None:
        """Move the play position on by `wall_seconds` × speed (nothing while paused)."""
        if self.paused or self.ended:
            self._status()
            return
        await self.seek(self.position + wall_seconds * self.speed)

    async def seek(self, t: float) -> None:
        """Go to `t` seconds: forward applies the records on the way; back replays from
        the start with a fresh session state."""
        t = max(0.0, min(t, self.duration))
        if t < self.position:
            self._reset()
        records = self.recording.records
        while self._next < len(records) and records[self._next].t <= t:
            record = records[self._next]
            self._next += 1
            self.position = max(self.position, record.t)
            await self._apply(record)
        self.position = t
        self._status()

    def _reset(self) -> None:
        s = self.session
        s.levels.clear()
        s.levels._ignored.clear()
        s.warmups.clear()
        s._held.clear()
        s._wedges.clear()
        s._wedged.clear()
        s.ramp_steps.clear()
        s.ramp_breaking.clear()
        s.ramp_finished = False
        s._last_seq = -1
        for member in self.source.members.values():
            member.state = StackState.STARTING
            member.resources = None
            member.recorded_signs = None
        for m in s.core.members.values():
            m.attached = False
            m.baseline = None
            m.resources = None
            m.mem_peak = 0
        s.core.concurrency = self.plan.concurrency
        s.core.rate = self.plan.rate
        s.replay_ramp = None
        s.caption = ""
        self.engine.latest = None
        self.engine.hists.clear()
        self._next = 0
        self.position = 0.0

    async def _apply(self, record: Record) -> None:
        s = self.session
        if isinstance(record, Tick):
            for mid, mt in record.members.items():
                member = self.source.members.get(mid)
                if member is not None:
                    member.state = StackState(mt.state)
                    member.resources = mt.resources
                    member.recorded_signs = mt.signs
            self.engine.latest = record.snap
            s.replay_ramp = record.ramp
            s.caption = record.caption
            await s.poll()
            for mid, mt in record.members.items():
                m = s.core.members.get(mid)
                if m is not None and mt.baseline is not None:
                    m.baseline = mt.baseline  # as live measured it, before any load
        elif isinstance(record, Hist):
            h = SparseHistogram()
            h.add_sparse(record.pairs)
            self.engine.hists[record.target] = h
        elif isinstance(record, Command):
            await self._command(record)
        elif isinstance(record, Log):
            member = self.source.members.get(record.member)
            if member is not None:
                member.log = record.lines
        elif isinstance(record, View):
            s.view_events.append((record.what, record.arg))
        elif isinstance(record, RampResult):
            s.ramp_steps = {k: list(v) for k, v in record.steps.items()}
            s.ramp_breaking = dict(record.breaking)
            s.ramp_end = record.ended
            s.ramp_notes = list(record.notes)

    async def _command(self, c: Command) -> None:
        s = self.session
        if c.what == "concurrency" and c.value is not None:
            await s.core.set_concurrency(int(c.value))
            s._new_level()
        elif c.what == "rate":
            await s.set_rate(None if c.value is None else float(c.value))
        elif c.what == "ramp":
            # (recorded when its levels began, after its clean start, as live)
            s._wedges.clear()
            s._wedged.clear()
            s.levels.clear()
            s.levels.counting_again()
            s.ramp_finished = False
            s.ramp_steps.clear()
            s.ramp_breaking.clear()
            s.ramp_top = int(c.value or 0)
        elif c.what == "ramp_done":
            for i in s.core.members:
                s.ramp_steps[i] = s.levels.results(i)
                s.ramp_breaking[i] = s.levels.breaking_point(i)
            s.ramp_finished = True
        elif c.what == "ramp_stop":
            s.replay_ramp = None

    def _status(self) -> None:
        state = "paused" if self.paused else f"×{self.speed:g}"
        if self.ended:
            state = "ended"
        self.session.replay_status = (
            f"REPLAY {Path(self.recording.path).name} {_clock(self.position)} / "
            f"{_clock(self.duration)} {state}"
        )

    # --- controls ---------------------------------------------------------------------

    def toggle_pause(self) -> None:
        self.paused = not self.paused
        self._status()

    def faster(self, steps: int = 1) -> None:
        i = min(len(SPEEDS) - 1, max(0, SPEEDS.index(self.speed) + steps))
        self.speed = SPEEDS[i]
        self._status()


def _clock(t: float) -> str:
    m, s = divmod(int(t), 60)
    return f"{m}:{s:02d}"


def recorded_levels(recording: Recording) -> dict[str, tuple[MemberInfo, list[Any]]]:
    """Each member's levels as the level log measured them (for a ghost)."""
    from stackrace.ramp import LevelLog

    log = LevelLog()
    for r in recording.records:
        if isinstance(r, Tick) and r.snap is not None:
            log.feed(r.snap)
    return {m.id: (m, log.results(m.id)) for m in recording.members}
