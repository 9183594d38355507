"""What a variant may change of a stack, and which values it may give: the one rule
for a variant on a command line, in a preset or a run file, and in the picker.

A variant is user text that may come from a preset, a run file or a colleague's command
line, and its values end up in command lines and rendered config files: each value is
checked against its param's kind (`param_kind`) before anything starts —
- workers, threads and params whose default is a whole number: a count, whole and ≥ 1,
  at most `COUNT_CEILING` (and workers and threads at most the machine's ceilings,
  stackrace.stacks.ceilings);
- params with `choices`: one of them;
- params declared `kinds = { P = "path" }`: an absolute, normalised path to an existing
  executable file (a server binary such as php-fpm); a variant read from a file (a
  preset, a run file, a recording) may name only the param's default or one the stack
  lists in `executables` (`check_override`: a data file that travels must never choose
  what runs);
- every other param: a word of letters, digits and `. _ - : = +` (no `/`, spaces,
  braces, quotes, `;` or control characters: nothing that could reach outside a
  directory, split an argument or end a line of a config file).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackrace.base import paths
from stackrace.settings.parsers import COMMAND_LINE
from stackrace.stacks import ceilings
from stackrace.stacks.definition import ConfigError, StackDef
from stackrace.stacks.placeholders import PLACEHOLDER, render, templated

# a param value of kind "word" (see the module docstring)
_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:=+-]{0,99}$")
PARAM_KINDS = ("count", "word", "path", "choice")
COUNT_CEILING = 100_000  # a count param (worker_connections, db_pool, spare processes)


def param_kind(spec: StackDef, key: str) -> str:
    """The kind of a tunable (PARAM_KINDS): declared in `kinds`, else `choice` for a
    param with choices, `count` for workers, threads and a param whose default is a
    whole number, `word` otherwise."""
    if key in ("workers", "threads"):
        return "count"
    if key in spec.choices:
        return "choice"
    if key in spec.kinds:
        return spec.kinds[key]
    return "count" if spec.params.get(key, "").isdigit() else "word"


def check_value(spec: StackDef, key: str, value: str) -> str | None:
    """What is wrong with `value` for the tunable `key` of `spec` (None: nothing)."""
    return check_kind(param_kind(spec, key), key, value, tuple(spec.choices.get(key, ())))


def check_override(
    spec: StackDef, ref: str, key: str, value: str, *, source: str, named_in: str
) -> None:
    """KEY=VALUE of the variant `ref`, held to its param's kind; written in a file
    (`named_in` is not COMMAND_LINE), a path param may name only its default or an
    executable the stack lists. ConfigError naming the stacks file `source`, or the
    file that named the executable."""
    problem = check_value(spec, key, value)
    if problem:
        raise ConfigError(f"{source}: stack '{ref}': key '{key}': {problem}")
    if named_in == COMMAND_LINE or param_kind(spec, key) != "path":
        return
    allowed = [spec.params[key], *spec.executables.get(key, [])]
    if value not in allowed:  # the file that named it is at fault, not the stacks file
        raise ConfigError(
            f"{named_in}: stack '{ref}': key '{key}': names the executable {value}: only "
            f"the command line (--stacks, or the picker) may, or the stack's own list in "
            f"{source} ({', '.join(allowed)})"
        )


def check_default_counts(spec: StackDef, base: str, overrides: dict[str, str], source: str) -> None:
    """A stacks file's own workers and threads, where a variant leaves them, are held to
    the same ceilings (ConfigError naming the file)."""
    for key in ("workers", "threads"):
        if key not in overrides:
            problem = check_value(spec, key, str(getattr(spec, key)))
            if problem:
                raise ConfigError(f"{source}: stack '{base}': key '{key}': {problem}")


def check_kind(kind: str, key: str, value: str, choices: tuple[str, ...] = ()) -> str | None:
    """What is wrong with `value` for a tunable `key` of this kind (PARAM_KINDS); the one
    rule for a variant on a command line, in a preset or a run file, and in the picker."""
    if kind == "choice":
        return None if value in choices else f"{value!r} is not one of {', '.join(choices)}"
    if kind == "count":
        if not (value.isascii() and value.isdigit()) or int(value) < 1:
            return f"must be a whole number >= 1, got {value!r}"
        number = int(value)
        ceiling = COUNT_CEILING
        if key in ("workers", "threads") and not ceilings.limits_lifted():
            machine = ceilings.tunable_ceilings()
            ceiling = machine.workers if key == "workers" else machine.threads
            if number > ceiling:
                return (
                    f"{number} is above this machine's ceiling of {ceiling} (from its cores "
                    "and memory; `stackrace --no-tunable-limits …` lifts it)"
                )
        if number > ceiling:
            return f"must be at most {ceiling}, got {number}"
        return None
    if kind == "path":
        return _check_path(value)
    if not _WORD.match(value):
        return (
            f"{value[:60]!r} is not a plain value: use letters, digits and . _ - : = + "
            "(no '/', spaces, quotes or control characters)"
        )
    return None


def _check_path(value: str) -> str | None:
    if not value.isprintable() or len(value) > 4096:
        return "a path must be printable text"
    if not value.startswith("/") or os.path.normpath(value) != value:
        return f"must be an absolute, normalised path (no '..', '.' or '//'), got {value!r}"
    if not os.path.isfile(value) or not os.access(value, os.X_OK):
        return f"{value} is not an executable file"
    return None


@dataclass(frozen=True)
class Tunable:
    """One setting a variant may change: `workers`, `threads` or a param, with its
    default and, where the stacks file lists them, the only values allowed."""

    key: str
    default: str
    choices: tuple[str, ...] = ()
    numeric: bool = False  # workers and threads: a whole number >= 1
    kind: str = "word"  # PARAM_KINDS: how a value is checked (check_kind)

    def problem(self, value: str) -> str | None:
        """What is wrong with `value` for this setting (None: nothing)."""
        return check_kind(self.kind, self.key, value, self.choices)


def tunables(spec: StackDef) -> list[Tunable]:
    """What the picker offers to change for a stack: workers and threads where the
    stack uses them (in a command, env or a file it renders), then every param."""
    used = {m.group(1) for _key, text in templated(spec) for m in PLACEHOLDER.finditer(text)}
    shipped = paths.shipped_dir()
    values: dict[str, Any] = {"apps": shipped / "apps", "root": shipped}
    for tmpl in spec.files:
        try:
            text = Path(render(tmpl.template, {**values, **_blank(tmpl.template)})).read_text()
        except (ConfigError, OSError, UnicodeDecodeError):
            continue
        used.update(m.group(1) for m in PLACEHOLDER.finditer(text))
    out = [
        Tunable(k, str(getattr(spec, k)), numeric=True, kind="count")
        for k in ("workers", "threads")
        if k in used
    ]
    out += [
        Tunable(k, v, tuple(spec.choices.get(k, ())), kind=param_kind(spec, k))
        for k, v in spec.params.items()
    ]
    return out


def _blank(text: str) -> dict[str, str]:
    return {
        m.group(1): "" for m in PLACEHOLDER.finditer(text) if m.group(1) not in ("apps", "root")
    }
