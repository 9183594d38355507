"""The picker's last choices, remembered in the user's config directory.

`$XDG_CONFIG_HOME/stackrace/last-race.json` (default `~/.config/stackrace/`): the stacks
(with their variants), workload, io delay, db queries, mode and level chosen when the
last race started. The picker opens with them; a file that cannot be read or no longer
fits (a stack since removed) is ignored, never an error: it is a convenience.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import msgspec

FILE_NAME = "last-race.json"


class Choices(msgspec.Struct, forbid_unknown_fields=False):
    stacks: list[str] = []
    workload: str = "hello"
    io_ms: int = 10
    queries: int = 10
    rate_mode: bool = False
    level: int = 10


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "stackrace"


def load_choices(path: Path | None = None) -> Choices | None:
    path = path or config_dir() / FILE_NAME
    try:
        return msgspec.json.decode(path.read_bytes(), type=Choices)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def save_choices(choices: Choices, path: Path | None = None) -> Path | None:
    """Write them (atomically); None when the directory cannot be written."""
    path = path or config_dir() / FILE_NAME
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(msgspec.json.format(msgspec.json.encode(choices), indent=2))
        tmp.replace(path)
        return path
    return None
