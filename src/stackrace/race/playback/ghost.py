"""A ghost: an earlier run shown beside the live panes, at the same load level.

"Now against last week": `stackrace --ghost last-week.json` (a `stackrace bench --json`
run) or `--ghost talk.jsonl.gz` (a recording). For each stack in the file a ghost pane
shows what that run measured at the level the live race is at now — req/s, p50, p99,
failures, RSS — or, when the run never measured that level, the nearest one it did,
saying which. Closed-loop levels and rates are different scales: a ghost only answers
in the mode its level was measured in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from stackrace.base import inputfile
from stackrace.base.errors import StackraceError
from stackrace.report.schema import RUN_FILE_LIMIT, loads


class GhostError(StackraceError, ValueError):
    pass


@dataclass(frozen=True)
class GhostLevel:
    level: int
    rate_mode: bool
    rps: float
    p50_us: int
    p99_us: int
    failed_ratio: float
    rss: int | None = None


@dataclass(frozen=True)
class GhostView:
    """What one ghost pane shows for the live level."""

    id: str  # unique among ghost panes
    name: str
    label: str  # what it is and when: "bench 2024-05-01", "recorded 2024-05-01"
    level: int  # the live level asked for
    at: GhostLevel | None  # the level shown (the same, or the nearest measured)
    stack_id: str = ""  # the stack it measured: its pane sits beside the live twin
    source: str = ""  # the file it comes from


@dataclass
class GhostStack:
    id: str
    name: str
    levels: list[GhostLevel] = field(default_factory=list)


@dataclass
class Ghost:
    label: str
    stacks: list[GhostStack]
    source: str = ""  # the file's name

    def view(self, level: int, rate_mode: bool) -> list[GhostView]:
        out = []
        for s in self.stacks:
            same_mode = [g for g in s.levels if g.rate_mode == rate_mode]
            at = min(
                same_mode,
                key=lambda g: (abs(_log(g.level) - _log(level)), g.level),
                default=None,
            )
            out.append(
                GhostView(
                    f"ghost-{self.label}-{s.id}", s.name, self.label, level, at, s.id, self.source
                )
            )
        return out


def _log(n: int) -> float:

    return math.log10(max(1, n))


def load_ghost(path: str | Path) -> Ghost:
    """A bench run (.json) or a recording (.jsonl / .jsonl.gz) as a ghost; GhostError
    names the file. A run file is read to the run files' bound (report.schema), a
    recording line by line (race/playback/recording.py): a damaged file is refused early."""

    p = Path(path)
    if p.suffix == ".json":
        try:
            data = inputfile.read_bytes(p, limit=RUN_FILE_LIMIT)
        except inputfile.InputFileError as exc:
            raise GhostError(str(exc)) from None
        if data[:2] != b"\x1f\x8b":
            return _from_bench(p, data)
    return _from_recording(p)


def _from_bench(p: Path, data: bytes) -> Ghost:
    try:
        run = loads(data, str(p))
    except ValueError as exc:
        raise GhostError(str(exc)) from None
    stacks = []
    for st in run.stacks:
        levels = []
        for lv in st.levels:
            w = lv.window
            tried = w.requests + w.lost
            failed = sum(n for k, n in w.failures.items() if k != "abandoned")
            levels.append(
                GhostLevel(
                    level=int(lv.rate) if lv.rate is not None else lv.concurrency,
                    rate_mode=lv.rate is not None,
                    rps=w.goodput,  # answers that count, as the live pane shows
                    p50_us=w.latency.p50,
                    p99_us=w.latency.p99,
                    failed_ratio=failed / tried if tried else 0.0,
                    rss=lv.memory_after.rss or None,
                )
            )
        stacks.append(GhostStack(st.name, st.title, levels))
    return Ghost(f"bench {run.started[:10]}", stacks, p.name)


def _from_recording(p: Path) -> Ghost:
    # the recording's decoder is built at its import, and only a --ghost of a recording
    # needs it
    from stackrace.race.playback.recording import (  # lazy: keeps the app's start-up fast
        RecordingError,
        load_recording,
        recorded_levels,
    )

    try:
        rec = load_recording(p)
    except RecordingError as exc:
        raise GhostError(str(exc)) from None
    stacks = []
    for mid, (info, steps) in recorded_levels(rec).items():
        levels = [
            GhostLevel(
                level=s.level,
                rate_mode=False,  # the level log does not tell rates apart: closed loop
                rps=s.rps,
                p50_us=s.p50_us,
                p99_us=s.p99_us,
                failed_ratio=s.failure_ratio,
            )
            for s in steps
        ]
        stacks.append(GhostStack(mid, info.name, levels))
    cut = " (cut short)" if rec.truncated else ""
    return Ghost(f"recorded {rec.header.created[:10]}{cut}", stacks, p.name)
