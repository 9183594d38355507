"""Stored bench scenarios: `presets/NAME.toml`.

A preset is race settings (settings/race_settings.py: the same keys as `stackrace bench`'s
options, checked by the same parsers, durations as "10s") plus what it is about:
`description`, `source` (the experiment it replays). A preset that replays one of the
classic experiments (`presets/seed-NNN-*.toml`) also carries the original's figures and
claims, for the run's then/now tables:

    experiment = "001"
    [[figures]]                       # req/s the original reported, per stack (and level)
    stack = "php-fpm-nginx"
    then = 7663
    [[claims]]                        # stackrace.report.schema.Claim; judged by report.claims
    id = "opcache"
    text = "opcache on: +20 % on hello (7,663 vs 6,336 req/s)"
    kind = "ratio"
    stacks = ["php-fpm-nginx", "php-fpm-nginx:opcache=off"]
    then = 1.21
    at_least = 1.05
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import msgspec

from stackrace.base import inputfile, paths
from stackrace.report.schema import CLAIM_KINDS, Claim, Figure, Then
from stackrace.settings.race_settings import RaceSettings, from_mapping
from stackrace.stacks.definition import ConfigError

PRESETS_DIR = paths.presets_dir()  # shipped with stackrace (a checkout's presets/)
# what a preset says about itself; every other key is a race setting
_ABOUT = ("description", "source", "original", "experiment", "figures", "claims")


class Preset(msgspec.Struct, forbid_unknown_fields=True):
    description: str
    settings: RaceSettings
    source: str = ""  # the experiment it reproduces
    original: dict[str, float] = {}  # figures of the original experiment, req/s per stack
    experiment: str | None = None  # "000"…"004": the classic experiment it replays
    figures: list[Figure] = []
    claims: list[Claim] = []
    file: str = ""  # where it was read from (a file's words: stacks.variants.resolve)

    @property
    def stacks(self) -> list[str]:
        return self.settings.stacks

    def then(self) -> Then | None:
        """What a run of this preset stores to put the original beside its own figures."""
        if self.experiment is None:
            return None
        figures = self.figures or [Figure(stack=k, then=v) for k, v in self.original.items()]
        return Then(
            experiment=self.experiment, source=self.source, figures=figures, claims=self.claims
        )


_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


def preset_path(name: str) -> Path:
    """A shipped preset's file by its name, or the file the user named: a name with a
    '/' or ending in .toml is a path; anything else must be a plain preset name, so no
    text can reach outside the presets directory by way of a name."""
    if "/" in name or name.endswith(".toml"):
        return Path(name)
    if not _NAME.match(name):
        raise ConfigError(f"{name!r} is not a preset name (letters, digits, '.', '_', '-')")
    return PRESETS_DIR / f"{name}.toml"


def load_preset(name: str) -> Preset:
    path = preset_path(name)
    try:
        raw: dict[str, Any] = inputfile.parse_toml(
            str(path), inputfile.read_text(path, limit=inputfile.MiB)
        )
    except inputfile.InputFileError as exc:
        if path.parent == PRESETS_DIR and not path.exists():
            known = ", ".join(sorted(p.stem for p in PRESETS_DIR.glob("*.toml")))
            raise ConfigError(f"no preset {name!r} (known: {known})") from None
        raise ConfigError(str(exc)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    about = {k: raw.pop(k) for k in _ABOUT if k in raw}
    if "description" not in about:
        raise ConfigError(f"{path}: key 'description': missing")
    try:
        settings = from_mapping(raw, str(path))
        about = msgspec.convert(about, dict[str, Any])
        preset = msgspec.convert(
            {**about, "settings": settings, "file": str(path)}, Preset, from_attributes=True
        )
    except (ValueError, msgspec.ValidationError) as exc:
        raise ConfigError(str(exc) if str(path) in str(exc) else f"{path}: {exc}") from None
    _check_claims(path, preset)
    return preset


def _check_claims(path: Path, preset: Preset) -> None:
    """A claim must be judgeable: a known kind, and only stacks the preset runs."""
    seen: set[str] = set()
    for claim in preset.claims:
        where = f"{path.name}: claim '{claim.id}'"
        if claim.id in seen:
            raise ConfigError(f"{where}: the id is used twice")
        seen.add(claim.id)
        if claim.kind not in CLAIM_KINDS:
            raise ConfigError(
                f"{where}: kind {claim.kind!r} is not one of {', '.join(CLAIM_KINDS)}"
            )
        unknown = [s for s in claim.stacks if s not in preset.stacks]
        if unknown:
            raise ConfigError(f"{where}: {', '.join(unknown)} not among the preset's stacks")
        if claim.kind == "untestable" and not claim.why:
            raise ConfigError(f"{where}: an untestable claim says why (`why`)")
    for fig in preset.figures:
        if fig.stack not in preset.stacks:
            raise ConfigError(f"{path.name}: figure for {fig.stack}: not among the preset's stacks")
    if (preset.claims or preset.figures) and preset.experiment is None:
        raise ConfigError(f'{path.name}: claims and figures need `experiment` (e.g. "000")')


def all_presets() -> dict[str, Preset]:
    return {p.stem: load_preset(p.stem) for p in sorted(PRESETS_DIR.glob("*.toml"))}
