"""Parsers for command-line values: one place that says what a valid value is.

Each parser takes the text the user typed and returns the value, or raises
`OptionValueError` (a ValueError) with a message that names what was wrong and repeats
what was given. The same parsers check a preset's and a run file's values; used as
argparse `type=` functions, the error reads

    stackrace load: argument --rate: must be a positive finite number, got 'nan'

(`OneLineArgumentParser` prints exactly that line and exits with status 2). A value that
would silently change the meaning of a run — a rate of 0 that means "closed loop", a
negative duration, a CPU the machine does not have — is an error here, never a fallback.

No Textual, no engine imports: every front end (load, bench, the app) may use these.

    positive_duration("10s") -> 10.0          non_negative_duration("0") -> 0.0
    positive_rate("500") -> 500.0             positive_int("4") -> 4
    positive_int_list("10,100") -> [10, 100]  cpu_list("0,1") / cpu_list("0-3") -> [0, 1, ...]
    procs("auto") -> "auto"; procs("3") -> 3  cap_procs(requested, cpus) -> (n, note or None)
"""

from __future__ import annotations

import argparse
import difflib
import itertools
import math
import os
import re
import sys
import textwrap
from collections.abc import Sequence
from typing import Any, Literal, NoReturn

from stackrace.base.errors import StackraceError
from stackrace.settings.units import parse_duration

__all__ = [
    "EXAMPLES",
    "HelpFormatter",
    "OneLineArgumentParser",
    "OptionValueError",
    "cap_procs",
    "cpu_list",
    "examples",
    "non_negative_duration",
    "non_negative_int",
    "note",
    "port_number",
    "positive_duration",
    "positive_int",
    "positive_int_list",
    "positive_rate",
    "procs",
    "timeout_duration",
    "usable_cpus",
]

Procs = int | Literal["auto"]  # what `procs` returns: a count, or "auto"


class OptionValueError(StackraceError, ValueError):
    """A value a parser here refuses: the message says what was wrong and what was given."""

    exit_code = 2


class HelpFormatter(argparse.HelpFormatter):
    """`--help` as a person reads it: prose re-wrapped to the terminal, but the Examples
    (an epilog starting `EXAMPLES`) kept line for line, as command lines must be; and a
    default said after every option that has one and whose help does not say it."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith(EXAMPLES):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return "\n".join(
            textwrap.wrap(
                " ".join(text.split()),
                width,
                initial_indent=indent,
                subsequent_indent=indent,
                break_on_hyphens=False,
            )
        )

    def _split_lines(self, text: str, width: int) -> list[str]:
        # an option's name is never cut at its hyphen ("--help-", "cluster")
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        unsaid = default is None or default is argparse.SUPPRESS or isinstance(default, bool)
        if "default" in text or unsaid or default == [] or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


EXAMPLES = "Examples:"


def examples(*lines: tuple[str, str]) -> str:
    """A help's Examples section (its epilog): each (command line, what it does), the
    command under a comment line. The walkthrough tier runs every one of them
    (tests/walkthrough/readme.py `help_lines`)."""
    out = [EXAMPLES]
    for command, what in lines:
        out += [f"  # {what}", f"  {command}"]
    return "\n".join(out)


# flags of wrk, wrk2, hey, oha and ab that differ here: what each is called in stackrace,
# said when one is typed (the option named must be one of the command's)
OTHER_TOOLS: dict[str, tuple[str, str]] = {
    "-n": ("ab's and hey's -n (a number of requests) is --requests here", "--requests"),
    "-z": ("hey's and oha's -z (a duration) is --duration here", "--duration"),
    "-t": ("wrk's -t (threads) is --procs here; hey's -t (a timeout) is --timeout", "--procs"),
    "-q": ("hey's and oha's -q (a rate) is --rate here, req/s in all", "--rate"),
    "-R": ("wrk2's -R (a rate) is --rate here", "--rate"),
    "-D": ("hey's and oha's -D (a body file) is --body-file here", "--body-file"),
    "-T": ("hey's and oha's -T (a content type) is -H 'Content-Type: …' here", "--header"),
    "-A": ("hey's -A (accept) is -H 'Accept: …' here", "--header"),
    "-p": ("ab's -p (a POST body file) is -m POST --body-file FILE here", "--body-file"),
    "-s": ("wrk's -s (a Lua script): --scenario FILE is a TOML file of requests", "--scenario"),
    "-o": ("hey's -o (an output format) is --json here", "--hdr-out"),
    "--latency": ("wrk's --latency: the latency distribution is always printed here", "--hdr-out"),
    "--disable-keepalive": ("oha's --disable-keepalive is --no-keepalive here", "--no-keepalive"),
    "-disable-keepalive": ("hey's -disable-keepalive is --no-keepalive here", "--no-keepalive"),
    "--http2": ("HTTP/2 is not loaded here: stackrace speaks HTTP/1.1", "--timeout"),
}


class OneLineArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line, `PROG: MESSAGE`, exit status 2.

    argparse's default prints the whole usage block first, which buries the one thing
    the user needs (which option, what was wrong); `--help` still shows the usage.
    Subparsers made with `add_subparsers().add_parser` inherit the class.

    The line names the command it is about (`stackrace load: unrecognized arguments:
    -t 4`, never the program alone: argparse reports a subcommand's unknown arguments
    from the top parser) and helps: the nearest option of that command ("did you mean
    --requests?"), and what a flag of wrk, hey, oha or ab is called here (`OTHER_TOOLS`).

    Option prefixes are never guessed (`allow_abbrev=False`): with argparse's default,
    `bench --app x` was taken as `--app-node x`, and a new option could silently change
    what an old command line means.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]  # argparse's own kwargs

    def parse_known_args(  # type: ignore[override]  # argparse's own signature
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras and " " in self.prog:
            # a subcommand's (`stackrace load`): said here, under its name
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        # our parsers (here, settings/race_parsers.py) raise ValueError with the reason;
        # argparse would print only "invalid positive_int value" for it. The builtin
        # types (int, float) keep argparse's own message. (_get_value is argparse's hook
        # for the type call; Python 3.11's, unchanged since 3.2.)
        parse = self._registry_get("type", action.type, action.type)
        if not callable(parse) or isinstance(parse, type):
            return super()._get_value(action, arg_string)
        try:
            return parse(arg_string)
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentError(action, str(exc)) from None
        except ValueError as exc:
            raise argparse.ArgumentError(action, str(exc)) from None

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message}{self.hint(message)}\n")

    def hint(self, message: str) -> str:
        """What the user may have meant ("" when nothing is near)."""
        ours = list(self._option_string_actions)
        if message.startswith("unrecognized arguments: "):
            said = []
            for word in message.removeprefix("unrecognized arguments: ").split():
                flag = word.split("=")[0]
                if not flag.startswith("-"):
                    continue
                other = OTHER_TOOLS.get(flag)
                if other is not None and other[1] in ours:
                    said.append(other[0])
                    continue
                near = difflib.get_close_matches(flag, ours, n=1, cutoff=0.6)
                if near:
                    said.append(f"did you mean {near[0]}?")
            return f" ({'; '.join(said)})" if said else ""
        choice = re.match(r"argument \S+: invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if choice:
            names = re.findall(r"'([^']*)'", choice.group(2))
            near = difflib.get_close_matches(choice.group(1), names, n=1, cutoff=0.6)
            return f" (did you mean {near[0]}?)" if near else ""
        return ""


def _bad(what: str, text: str) -> OptionValueError:
    return OptionValueError(f"must be {what}, got {text!r}")


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
    try:
        value = float(text)
    except ValueError:
        raise _bad("a positive finite number", text) from None
    if not math.isfinite(value) or value <= 0:
        raise _bad("a positive finite number", text)
    return value


def positive_int(text: str) -> int:
    """A whole number ≥ 1 (connections, requests, repeats, workers)."""
    try:
        value = int(text.strip())
    except ValueError:
        raise _bad("a whole number >= 1", text) from None
    if value < 1:
        raise _bad("a whole number >= 1", text)
    return value


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
    try:
        value = int(text.strip())
    except ValueError:
        raise _bad("a TCP port from 1 to 65535", text) from None
    if not 1 <= value <= 65535:
        raise _bad("a TCP port from 1 to 65535", text)
    return value


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


def note(prog: str, text: str) -> None:
    """Print a note about an adjusted option to stderr, one line, prefixed by the program."""
    print(f"{prog}: note: {text}", file=sys.stderr)
