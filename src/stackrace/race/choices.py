"""The picker's last choices, remembered in the user's config directory.

`last-race.json` in stackrace's config directory (stackrace.paths.config_dir:
`$STACKRACE_HOME/config`, else `$XDG_CONFIG_HOME/stackrace`, else `~/.config/stackrace`):
the stacks (with their variants), workload, io delay, db queries, mode and level chosen
when the last race started. The picker opens with them; a file that cannot be read or
no longer fits (a stack since removed) is ignored, never an error: it is a convenience.
It is written whole or not at all (stackrace.atomicfile).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import msgspec

from stackrace import paths
from stackrace.atomicfile import write_atomic

FILE_NAME = "last-race.json"


class Choices(msgspec.Struct, forbid_unknown_fields=False):
    stacks: list[str] = []
    workload: str = "hello"
    io_ms: int = 10
    queries: int = 10
    rate_mode: bool = False
    level: int = 10


def choices_file() -> Path:
    """Where the last race's choices are kept (the one config directory: paths.py)."""
    return paths.config_dir() / FILE_NAME


def load_choices(path: Path | None = None) -> Choices | None:
    path = path or choices_file()
    try:
        return msgspec.json.decode(path.read_bytes(), type=Choices)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def save_choices(choices: Choices, path: Path | None = None) -> Path | None:
    """Write them (whole or not at all); None when the directory cannot be written."""
    path = path or choices_file()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, msgspec.json.format(msgspec.json.encode(choices), indent=2))
        return path
    return None
