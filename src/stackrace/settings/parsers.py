"""Parsers for command-line values: one place that says what a valid value is.

Each parser takes the text the user typed and returns the value, or raises
`OptionValueError` (a ValueError) with a message that names what was wrong and repeats
what was given. The same parsers check a preset's and a run file's values; used as
argparse `type=` functions, the error reads

    stackrace load: argument --rate: must be a positive finite number, got 'nan'

(stackrace.commands.parser's `OneLineArgumentParser` prints exactly that line and exits
with status 2). A value that
would silently change the meaning of a run — a rate of 0 that means "closed loop", a
negative duration, a CPU the machine does not have — is an error here, never a fallback.

No Textual, no engine imports: every front end (load, bench, the app) may use these.

    positive_duration("10s") -> 10.0          non_negative_duration("0") -> 0.0
    positive_rate("500") -> 500.0             positive_int("4") -> 4
    positive_int_list("10,100") -> [10, 100]  cpu_list("0,1") / cpu_list("0-3") -> [0, 1, ...]
    procs("auto") -> "auto"; procs("3") -> 3  cap_procs(requested, cpus) -> (n, note or None)
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable
from typing import Literal, TypeVar

from stackrace.base.errors import StackraceError
from stackrace.settings.units import parse_duration

__all__ = [
    "OptionValueError",
    "cap_procs",
    "cpu_list",
    "non_negative_duration",
    "non_negative_int",
    "port_number",
    "positive_duration",
    "positive_int",
    "positive_int_list",
    "positive_rate",
    "procs",
    "timeout_duration",
    "usable_cpus",
]

N = TypeVar("N", int, float)  # what a number parser returns
Procs = int | Literal["auto"]  # what `procs` returns: a count, or "auto"


class OptionValueError(StackraceError, ValueError):
    """A value a parser here refuses: the message says what was wrong and what was given."""

    exit_code = 2


def _bad(what: str, text: str) -> OptionValueError:
    return OptionValueError(f"must be {what}, got {text!r}")


def _checked(
    text: str, convert: Callable[[str], N], ok: Callable[[N], bool], want: str, given: str = ""
) -> N:
    """`convert(text)` when it converts and is `ok`; else one error saying `want` and what
    was `given` (default: `text`). One rule for every number parser: a value that does not
    parse and one out of range read the same to the user."""
    try:
        value = convert(text)
    except ValueError:
        raise _bad(want, given or text) from None
    if not ok(value):
        raise _bad(want, given or text)
    return value


MAX_DURATION_S = 24 * 3600.0  # a run (or level) longer than a day is a typo
MAX_TIMEOUT_S = 3600.0  # a request or connect timeout: an hour, as a stacks file's
# where a stack reference was written, for stacks.variants.resolve: the one place that
# may name any executable (the picker is the command line's too: the person at the
# keyboard); a preset, a run file or another stack's `upstream` may not
COMMAND_LINE = "the command line"


def _duration(text: str) -> float:
    try:
        value = parse_duration(text)
    except ValueError:
        raise _bad("a duration like 500ms, 10s or 2m", text) from None
    if not math.isfinite(value):
        raise _bad("a finite duration", text)
    if value > MAX_DURATION_S:
        raise _bad("a duration of at most 24h", text)
    return value


def positive_duration(text: str) -> float:
    """A duration longer than zero ('10s', '500ms', '2m', '1.5' in seconds) → seconds."""
    value = _duration(text)
    if value <= 0:
        raise _bad("a duration longer than zero (500ms, 10s, 2m)", text)
    return value


def timeout_duration(text: str) -> float:
    """A timeout: longer than zero, at most an hour (`MAX_TIMEOUT_S`)."""
    value = positive_duration(text)
    if value > MAX_TIMEOUT_S:
        raise _bad("a timeout of at most 1h", text)
    return value


def non_negative_duration(text: str) -> float:
    """A duration that may be zero ('0', '0s', '2s') → seconds; for warm-ups and delays."""
    return _duration(text)


def precision(text: str) -> float:
    """'5%' or '0.05' → 0.05: a share between 0.1 % and 50 %."""
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise _bad("a share like 5% or 0.05", text) from None
    if not 0.001 <= value <= 0.5:
        raise _bad("a share between 0.1% and 50%", text)
    return value


def positive_rate(text: str) -> float:
    """A request rate: a finite number above zero (0, negatives, nan and inf are errors)."""
    return _checked(text, float, lambda v: math.isfinite(v) and v > 0, "a positive finite number")


def positive_int(text: str) -> int:
    """A whole number ≥ 1 (connections, requests, repeats, workers)."""
    return _checked(text.strip(), int, lambda v: v >= 1, "a whole number >= 1", given=text)


def non_negative_int(text: str) -> int:
    """A whole number ≥ 0 (a delay in ms, a count of warm-up requests)."""
    try:
        n = int(text)
    except ValueError:
        raise OptionValueError(f"must be a whole number, got {text!r}") from None
    if n < 0:
        raise OptionValueError(f"must be 0 or more, got {text!r}")
    return n


def port_number(text: str) -> int:
    """A TCP port to listen on: 1..65535 (0, "any port", would silently mean another)."""
    return _checked(
        text.strip(), int, lambda v: 1 <= v <= 65535, "a TCP port from 1 to 65535", given=text
    )


def positive_int_list(text: str) -> list[int]:
    """Comma-separated whole numbers ≥ 1, each above the one before: levels such as
    concurrency '10,100,500'. A level given twice or out of order is refused: `5,5`
    once judged a level against itself ("queueing at 5, latency ×1.1")."""
    want = "comma-separated whole numbers >= 1, each above the last, e.g. 10,100,500"
    parts = [p.strip() for p in text.split(",")]
    if not parts or any(not p for p in parts):
        raise _bad(want, text)
    try:
        values = [int(p) for p in parts]
    except ValueError:
        raise _bad(want, text) from None
    if any(v < 1 for v in values):
        raise _bad(want, text)
    for before, after in itertools.pairwise(values):
        if after <= before:
            what = "twice" if after == before else f"after {before:,}"
            raise OptionValueError(f"must rise level by level: {after:,} comes {what} in {text!r}")
    return values


def usable_cpus() -> list[int]:
    """The CPUs this process may run on (its affinity mask: a container or taskset may
    allow fewer than the machine has), sorted."""
    return sorted(os.sched_getaffinity(0))


def _fmt_cpus(cpus: list[int]) -> str:
    if cpus and cpus == list(range(cpus[0], cpus[-1] + 1)) and len(cpus) > 2:
        return f"{cpus[0]}-{cpus[-1]}"
    return ",".join(map(str, cpus))


def cpu_list(text: str) -> list[int]:
    """CPUs to pin to: '1', '2,3' or '0-3', each one this process may use (see
    `usable_cpus`); duplicates are an error, the result is sorted."""
    usable = usable_cpus()
    hint = f"CPUs of this machine ({_fmt_cpus(usable)}), e.g. '1', '0,1' or '0-1'"
    cpus: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        lo, dash, hi = part.partition("-")
        try:
            if dash and lo:  # a range; a leading '-' is a negative number, not a range
                first, last = int(lo), int(hi)
                if first > last:
                    raise ValueError
                cpus.extend(range(first, last + 1))
            else:
                cpus.append(int(part))
        except ValueError:
            raise _bad(hint, text) from None
    bad = [c for c in cpus if c not in usable]
    if bad:
        raise OptionValueError(
            f"CPU {bad[0]} is not one this machine lets stackrace use "
            f"({_fmt_cpus(usable)}), got {text!r}"
        )
    if len(set(cpus)) != len(cpus):
        raise OptionValueError(f"a CPU is named twice, got {text!r}")
    return sorted(cpus)


def procs(text: str) -> Procs:
    """Engine processes: a whole number ≥ 1, or 'auto'. Pair with `cap_procs`."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return positive_int(text)
    except OptionValueError:
        raise _bad("a whole number >= 1 or 'auto'", text) from None


def cap_procs(
    requested: Procs, cpus: list[int] | None = None, auto_max: int = 4
) -> tuple[int, str | None]:
    """The engine processes to start for `requested`, and a note when it was capped.

    More engine processes than the cores they may run on only take turns on those cores:
    each pays its start-up (~0.15 s) inside the measured time and they compete for CPU,
    so req/s is understated. Measured on 2 cores, `load --procs 40 -d 2s -c 8` against
    the test server: 3.84-4.30 s "measured" and 4,200-8,800 req/s uncapped; capped at 2,
    2.04-2.07 s and ~23,000 req/s. The cap is the CPUs the engine is pinned to (`cpus`),
    else the usable CPUs. 'auto' is one per usable core, at most `auto_max` (the
    engine's own rule), and never needs a note.
    """
    cores = len(cpus) if cpus else len(usable_cpus())
    cores = max(1, cores)
    if requested == "auto":
        return max(1, min(auto_max, cores)), None
    if requested <= cores:
        return requested, None
    where = (
        f"the {cores} CPU{'s' if cores > 1 else ''} of --engine-cpus"
        if cpus
        else (f"the {cores} usable core{'s' if cores > 1 else ''}")
    )
    return cores, (
        f"--procs {requested} capped at {cores}: more engine processes than {where} "
        "would compete for them and understate req/s"
    )
