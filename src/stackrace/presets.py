"""Stored bench scenarios: `presets/NAME.toml`, the same settings as `stackrace bench`."""

from __future__ import annotations

import tomllib
from pathlib import Path

import msgspec

from stackrace.config import ROOT, ConfigError

PRESETS_DIR = ROOT / "presets"


class Preset(msgspec.Struct, forbid_unknown_fields=True):
    description: str
    stacks: list[str]
    workload: str = "hello"
    io_ms: int = 10
    queries: int = 10
    concurrency: list[int] = msgspec.field(default_factory=lambda: [10, 100])
    duration: str = "10s"
    warmup: str = "2s"
    rate: float | None = None
    requests: int | None = None
    isolation: str = "auto"
    repeat: int = 1
    timeout: str = "10s"
    cpus: int | None = None
    memory_max: str | None = None
    source: str = ""  # the experiment it reproduces
    original: dict[str, float] = {}  # figures of the original experiment, req/s per stack


def preset_path(name: str) -> Path:
    p = Path(name)
    return p if p.suffix == ".toml" and p.exists() else PRESETS_DIR / f"{name}.toml"


def load_preset(name: str) -> Preset:
    path = preset_path(name)
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        known = ", ".join(sorted(p.stem for p in PRESETS_DIR.glob("*.toml")))
        raise ConfigError(f"no preset {name!r} (known: {known})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    try:
        return msgspec.convert(raw, Preset)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def all_presets() -> dict[str, Preset]:
    return {p.stem: load_preset(p.stem) for p in sorted(PRESETS_DIR.glob("*.toml"))}
