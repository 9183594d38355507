"""Play a recording back with no servers and no engine (the file: race/playback/recording.py).

    stackrace replay talk.jsonl.gz            # the same app, the same panes, from the file

`ReplayEngine` implements the core's `LoadEngine` (its `latest` is the recorded snapshot
at the play position; commands to it are no-ops), `ReplaySource` hands out
`ReplayMember`s whose state and samples are the recorded ones, and `ReplayPlayer` moves
the play position — pause, speed ×¼ to ×16, seek — applying each record to an ordinary
`Session`, so the level log, verdicts, warm-up and summary are recomputed by the same
code as live. Seeking back rebuilds the session from the start (fast: no UI in between).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from stackrace.base.printable import terminal
from stackrace.engine.histogram import LatencyHistogram, SparseHistogram
from stackrace.engine.model import EngineSnapshot, TargetSpec
from stackrace.race.core.clock import RealClock
from stackrace.race.core.core import RaceCore
from stackrace.race.core.members import StackChoice
from stackrace.race.core.plan import RacePlan
from stackrace.race.core.state import StackState
from stackrace.race.live.session import Session
from stackrace.race.playback.recording import (
    Command,
    EvidenceRecord,
    Hist,
    Log,
    MemberInfo,
    RampResult,
    Record,
    Recording,
    Tick,
    View,
)
from stackrace.stacks import protocols
from stackrace.stacks.listen import ListenState
from stackrace.stacks.sampler import ResourceSample
from stackrace.stacks.signs import ServerSigns

if TYPE_CHECKING:
    from stackrace.engine.aggregate import IntervalWatcher


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

    def engine_pids(self, target_id: str | None = None) -> list[int]:
        return []  # no process: a model's figures

    def watch_intervals(self, watcher: IntervalWatcher) -> None:
        """A recording keeps no interval histograms: its series is read from its
        running totals (race/playback/series.py), not watched."""

    def total_percentiles(
        self, target_id: str, points: Sequence[float], uncorrected: bool = False
    ) -> list[int]:
        return self.hists.get(target_id, SparseHistogram()).percentiles(points)


@dataclass
class ReplayMember:
    """A MemberHandle whose state and samples are the recorded ones. Who it is (id,
    name, family, external) is the recording's `MemberInfo`, read once: it never
    changes during a replay."""

    info: MemberInfo
    state: StackState = StackState.STARTING
    resources: ResourceSample | None = None
    log: list[str] = field(default_factory=list)
    recorded_signs: ServerSigns | None = None
    id: str = field(init=False)
    name: str = field(init=False)
    family: str = field(init=False)
    external: bool = field(init=False)

    def __post_init__(self) -> None:
        info = self.info
        self.id, self.name = info.id, info.name
        self.family, self.external = info.family, info.external

    base_url = ""  # nothing is loaded: the recorded figures are replayed
    cacert = None

    @property
    def http(self) -> str:
        # its id is the stack as it was named (`hypercorn:http=2`): the pane says it again
        return protocols.named_http(self.info.id) if not self.info.external else "1.1"

    def log_tail(self, lines: int = 20) -> list[str]:
        # a recording's lines are a file's text: printable, whoever wrote them
        return [terminal(line) for line in (self.log or ["(replay: no log was recorded)"])[-lines:]]

    def sample(self) -> ResourceSample | None:
        return self.resources

    listen_port = None  # nothing runs: the recorded signs are replayed
    error = None  # a replay starts nothing

    def signs(self, now: float, listen: ListenState | None) -> ServerSigns | None:
        return self.recorded_signs

    def exposed(self) -> list[str]:
        return []

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
            clock=RealClock(self.clock),
            sample_every=0.0,
            signs_every=0.0,
        )
        self.session = Session(core)
        # a preset's classic experiment: the strip beside the panes, as it was live
        self.session.then = recording.header.then
        self.plan = RacePlan(stacks=tuple(self.source.members), settings=recording.header.settings)
        for m in recording.members:  # the knee is predicted from the pool recorded
            if m.workers is not None and m.threads is not None:
                core.evidence.pools[m.id] = (m.family, m.workers, m.threads)

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
        s.keeper.clear()
        s.core.evidence.kept.clear()
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
        elif isinstance(record, EvidenceRecord):
            s.core.evidence.keep(record.member, record.why)
        elif isinstance(record, RampResult):
            s.ramp_steps = {k: list(v) for k, v in record.steps.items()}
            s.ramp_breaking = dict(record.breaking)
            s.ramp_end = record.ended
            s.ramp_notes = list(record.notes)

    async def _command(self, c: Command) -> None:
        s = self.session
        if c.what == "concurrency" and c.value is not None:
            await s.core.set_concurrency(int(c.value))
            s.new_level()
        elif c.what == "rate":
            await s.set_rate(None if c.value is None else float(c.value))
        elif c.what == "ramp":
            # (recorded when its levels began, after its clean start, as live)
            s.keeper.forget_stalls()
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
        # a recording cut short (the app killed mid-write) plays what it holds, and says so
        cut = " (cut short)" if self.recording.truncated else ""
        self.session.replay_status = (
            f"REPLAY {Path(self.recording.path).name} {_clock(self.position)} / "
            f"{_clock(self.duration)}{cut} {state}"
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
