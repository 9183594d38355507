"""Stored bench scenarios: `presets/NAME.toml`.

A preset is race settings (race/settings.py: the same keys as `stackrace bench`'s
options, checked by the same parsers, durations as "10s") plus what it is about:
`description`, `source` (the experiment it replays) and `original` (that experiment's
figures, for "then" beside "now").
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import msgspec

from stackrace.config import ROOT, ConfigError
from stackrace.race_settings import RaceSettings, from_mapping

PRESETS_DIR = ROOT / "presets"
_ABOUT = ("description", "source", "original")


class Preset(msgspec.Struct, forbid_unknown_fields=True):
    description: str
    settings: RaceSettings
    source: str = ""  # the experiment it reproduces
    original: dict[str, float] = {}  # figures of the original experiment, req/s per stack

    @property
    def stacks(self) -> list[str]:
        return self.settings.stacks


def preset_path(name: str) -> Path:
    p = Path(name)
    return p if p.suffix == ".toml" and p.exists() else PRESETS_DIR / f"{name}.toml"


def load_preset(name: str) -> Preset:
    path = preset_path(name)
    try:
        raw: dict[str, Any] = tomllib.loads(path.read_text())
    except FileNotFoundError:
        known = ", ".join(sorted(p.stem for p in PRESETS_DIR.glob("*.toml")))
        raise ConfigError(f"no preset {name!r} (known: {known})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    about = {k: raw.pop(k) for k in _ABOUT if k in raw}
    if "description" not in about:
        raise ConfigError(f"{path}: key 'description': missing")
    try:
        settings = from_mapping(raw, str(path))
        return msgspec.convert({**about, "settings": settings}, Preset, from_attributes=True)
    except (ValueError, msgspec.ValidationError) as exc:
        raise ConfigError(str(exc) if str(path) in str(exc) else f"{path}: {exc}") from None


def all_presets() -> dict[str, Preset]:
    return {p.stem: load_preset(p.stem) for p in sorted(PRESETS_DIR.glob("*.toml"))}
