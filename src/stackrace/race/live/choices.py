"""The picker's last choices, remembered in the user's config directory.

`last-race.json` in stackrace's config directory (stackrace.base.paths.config_dir:
`$STACKRACE_HOME/config`, else `$XDG_CONFIG_HOME/stackrace`, else `~/.config/stackrace`):
the stacks (with their variants), workload, io delay, db queries, mode and level chosen
when the last race started. The picker opens with them; a file that cannot be read or
no longer fits (a stack since removed) is ignored, never an error: it is a convenience.
It is written whole or not at all (stackrace.base.atomicfile).

The settings among them are RaceSettings fields, named in `PICKED` and nothing more:
their types and defaults are RaceSettings', and a file is read back through the same
parsers as the command line and a preset (`race_settings.from_mapping`), so a
hand-edited `"io_ms": -5` or `"workload": "../x"` is a file ignored, not a race that
starts with it. Only the mode and the starting level are the picker's own (a level is
the app's, not bench's list of levels). The file keeps its flat keys, so a file written
before still loads.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import msgspec

from stackrace.base import inputfile, paths
from stackrace.base.atomicfile import write_atomic
from stackrace.race.core.members import StackChoice
from stackrace.race.core.plan import RacePlan
from stackrace.settings.race_settings import RaceSettings, from_mapping, merge

FILE_NAME = "last-race.json"

# the RaceSettings fields the picker chooses, and remembers
PICKED = ("stacks", "workload", "io_ms", "queries")


class _Mode(msgspec.Struct):
    """The picker's own choices: closed loop or a rate, and the starting level."""

    rate_mode: bool = False
    level: Annotated[int, msgspec.Meta(ge=1)] = RacePlan().concurrency


def _picked(settings: RaceSettings) -> RaceSettings:
    """Settings with the picked fields alone (the others at their defaults)."""
    return msgspec.structs.replace(
        RaceSettings(), **{name: getattr(settings, name) for name in PICKED}
    )


@dataclass(frozen=True)
class Choices:
    settings: RaceSettings = field(default_factory=RaceSettings)  # the PICKED fields count
    rate_mode: bool = False
    level: int = _Mode().level

    def __post_init__(self) -> None:
        object.__setattr__(self, "settings", _picked(self.settings))

    @property
    def stacks(self) -> list[str]:
        return self.settings.stacks

    @classmethod
    def of_plan(cls, plan: RacePlan) -> Choices:
        """What to remember of a plan the picker dismissed with."""
        settings = merge(plan.settings, {"stacks": list(plan.stacks)})
        return cls(settings, rate_mode=plan.rate is not None, level=plan.concurrency)

    def to_json(self) -> bytes:
        values: dict[str, Any] = {name: getattr(self.settings, name) for name in PICKED}
        values.update(msgspec.structs.asdict(_Mode(self.rate_mode, self.level)))
        return msgspec.json.format(msgspec.json.encode(values), indent=2)

    def apply(self, plan: RacePlan, catalog: list[StackChoice]) -> RacePlan:
        """The plan with these choices, unless the command line chose stacks; a stack
        no longer in the catalog (or not available) is dropped."""
        if plan.stacks:
            return plan
        known = {c.id for c in catalog if c.available}
        stacks = tuple(s for s in self.stacks if s.partition(":")[0] in known)
        picked = {name: getattr(self.settings, name) for name in PICKED if name != "stacks"}
        return RacePlan(
            stacks=stacks,
            urls=plan.urls,
            settings=msgspec.structs.replace(plan.settings, **picked),
            concurrency=self.level,
            rate=float(self.level) if self.rate_mode else None,
        )


def choices_file() -> Path:
    """Where the last race's choices are kept (the one config directory: base/paths.py)."""
    return paths.config_dir() / FILE_NAME


def load_choices(path: Path | None = None) -> Choices | None:
    """The last choices, or None when there are none or they are not valid."""
    path = path or choices_file()
    try:
        raw = inputfile.parse_json(str(path), inputfile.read_bytes(path, limit=inputfile.MiB))
        if not isinstance(raw, dict):
            return None
        settings = from_mapping({k: raw[k] for k in PICKED if k in raw}, str(path))
        mode = msgspec.convert({k: v for k, v in raw.items() if k not in PICKED}, _Mode)
    except (OSError, ValueError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    return Choices(settings, rate_mode=mode.rate_mode, level=mode.level)


def save_choices(choices: Choices, path: Path | None = None) -> Path | None:
    """Write them (whole or not at all); None when the directory cannot be written."""
    path = path or choices_file()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, choices.to_json())
        return path
    return None
