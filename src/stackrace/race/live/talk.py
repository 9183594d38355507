"""A talk track: a scripted sequence of load levels with timings and captions.

A speaker writes the demo once and it plays the same every time (`stackrace --talk
FILE --go`). The file is TOML, one `[[step]]` per moment:

    [[step]]
    at = "0s"                 # seconds since the race started (or `after`: since the
    concurrency = 1           # previous step)
    say = "One client each: everyone answers in 10 ms"

    [[step]]
    after = "20s"
    concurrency = 100
    say = "100 clients: the sync worker makes them queue"

    [[step]]
    after = "20s"
    rate = 500                # constant rate from here (req/s per stack); "closed" = false
    say = "500 req/s each: who keeps the schedule?"

    [[step]]
    after = "20s"
    ramp = true               # a full ramp from a clean start; its summary opens at the end

A step may set `concurrency`, `rate` (a number, or `false` for closed loop), `ramp`,
and `say` (the caption shown in the app's status line until the next one). The words
mean what they say everywhere: `concurrency` is connections per stack, a closed loop
(after a `rate` step it goes back to one), `rate` is req/s per stack; one step sets one
of them (`rate = false` with a `concurrency` is a closed loop at that many). Parsing
errors name the file, the step and the key. `TalkPlayer` is clock-driven like the ramp:
`due(now)` returns the steps whose time has come; the session applies them.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackrace.base import inputfile
from stackrace.base.errors import StackraceError
from stackrace.settings.units import parse_duration

_KEYS = {"at", "after", "concurrency", "rate", "ramp", "say"}


class TalkError(StackraceError, ValueError):
    pass


@dataclass(frozen=True)
class TalkStep:
    at: float  # seconds since the track started
    concurrency: int | None = None
    rate: float | None = None
    closed: bool = False  # back to closed loop
    ramp: bool = False
    say: str | None = None


def parse_talk(text: str, where: str = "talk track") -> list[TalkStep]:
    try:
        raw = inputfile.parse_toml(where, text)
    except inputfile.InputFileError as exc:
        raise TalkError(str(exc)) from None
    except tomllib.TOMLDecodeError as exc:
        raise TalkError(f"{where}: not valid TOML: {exc}") from None
    steps_raw = raw.get("step")
    if not isinstance(steps_raw, list) or not steps_raw:
        raise TalkError(f"{where}: no [[step]] tables")
    steps: list[TalkStep] = []
    clock = 0.0
    for i, s in enumerate(steps_raw, 1):
        here = f"{where}: step {i}"
        unknown = set(s) - _KEYS
        if unknown:
            raise TalkError(f"{here}: unknown key {sorted(unknown)[0]!r} (known: {sorted(_KEYS)})")
        if "at" in s and "after" in s:
            raise TalkError(f"{here}: give `at` or `after`, not both")
        if "at" in s:
            clock = _seconds(s["at"], f"{here}: key 'at'")
        else:
            clock += _seconds(s.get("after", 0), f"{here}: key 'after'")
        conc = s.get("concurrency")
        if conc is not None and (isinstance(conc, bool) or not isinstance(conc, int) or conc < 1):
            raise TalkError(f"{here}: key 'concurrency': must be a whole number ≥ 1")
        rate = s.get("rate")
        closed = rate is False
        if (rate is not None and not closed) and (
            isinstance(rate, bool) or not isinstance(rate, int | float) or rate <= 0
        ):
            raise TalkError(f"{here}: key 'rate': a number of req/s, or false")
        if conc is not None and rate is not None and not closed:
            raise TalkError(
                f"{here}: give `concurrency` (connections, a closed loop) or `rate` "
                "(req/s), not both"
            )
        say = s.get("say")
        if say is not None and not isinstance(say, str):
            raise TalkError(f"{here}: key 'say': must be text")
        steps.append(
            TalkStep(
                at=clock,
                concurrency=conc,
                rate=None if closed or rate is None else float(rate),
                closed=closed,
                ramp=bool(s.get("ramp", False)),
                say=say,
            )
        )
    return steps


def load_talk(path: str | Path) -> list[TalkStep]:
    p = Path(path)
    try:
        text = inputfile.read_text(p, limit=inputfile.MiB)
    except inputfile.InputFileError as exc:
        raise TalkError(str(exc)) from None
    return parse_talk(text, str(p))


def _seconds(value: Any, where: str) -> float:
    try:
        return float(value) if isinstance(value, int | float) else parse_duration(str(value))
    except ValueError as exc:
        raise TalkError(f"{where}: {exc}") from None


@dataclass
class TalkPlayer:
    steps: list[TalkStep]
    started_at: float | None = None
    index: int = 0

    def due(self, now: float) -> list[TalkStep]:
        """The steps whose time has come since the last call (the first call starts it)."""
        if self.started_at is None:
            self.started_at = now
        elapsed = now - self.started_at
        out = []
        while self.index < len(self.steps) and self.steps[self.index].at <= elapsed:
            out.append(self.steps[self.index])
            self.index += 1
        return out

    @property
    def done(self) -> bool:
        return self.index >= len(self.steps)

    def progress(self) -> str:
        return f"talk {self.index}/{len(self.steps)}"
