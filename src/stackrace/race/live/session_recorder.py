"""The recorder: a listener of the live session that writes the race to a recording.

    session.listeners.append(Recorder("talk.jsonl.gz"))   # race/live/setup.py, --record

It reads the session it listens to (its core, its ramp's findings, its view), so it sits
with the session in race/live; the file's records and their reader are
race/playback/recording.py's, which knows no session (ghosts and replays read files
without one). A record is written when something changed: a command, a view key, a new
engine interval (the whole snapshot, each member's state and samples), a member's log
when it crashed, an evidence window once, a histogram once a second a target.
"""

from __future__ import annotations

import gzip
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING

import msgspec

from stackrace.race.core.state import StackState
from stackrace.race.playback.recording import (
    FORMAT,
    HIST_EVERY,
    Command,
    EvidenceRecord,
    Header,
    Hist,
    Log,
    MemberInfo,
    MemberTick,
    NewMember,
    RampResult,
    Record,
    Tick,
    View,
)

if TYPE_CHECKING:
    from stackrace.race.live.session import Session
    from stackrace.race.live.view import SessionView

_ENCODER = msgspec.json.Encoder()


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
        self._evidence: set[tuple[str, int]] = set()  # (member, level) windows written
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
                then=session.then,
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
                pool = core.evidence.pool(m)
                workers, threads = (pool[1], pool[2]) if pool is not None else (None, None)
                info = MemberInfo(mid, h.name, h.family, h.external, workers, threads)
                self._write(NewMember(self._t(), info))
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
        for mid, by_level in core.evidence.kept.items():
            for level, why in by_level.items():
                if (mid, level) not in self._evidence:
                    self._evidence.add((mid, level))
                    self._write(EvidenceRecord(t, mid, why))
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
