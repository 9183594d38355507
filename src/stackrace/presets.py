"""Stored bench scenarios: `presets/NAME.toml`, the same settings as `stackrace bench`.

A preset that replays one of the classic experiments (`presets/seed-NNN-*.toml`) also
carries the original's figures and claims, for the run's then/now tables:

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

import tomllib
from pathlib import Path

import msgspec

from stackrace.config import ROOT, ConfigError
from stackrace.report.schema import CLAIM_KINDS, Claim, Figure, Then

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
    # every request on a new connection (Connection: close), as ab without -k; the engine
    # side is being added on main: here it is carried to BenchPlan only
    keepalive: bool = True
    warmup_requests: int = 0  # warm up by this many requests as well as by time (main)
    experiment: str | None = None  # "000"…"004": the classic experiment it replays
    figures: list[Figure] = []
    claims: list[Claim] = []

    def then(self) -> Then | None:
        """What a run of this preset stores to put the original beside its own figures."""
        if self.experiment is None:
            return None
        figures = self.figures or [Figure(stack=k, then=v) for k, v in self.original.items()]
        return Then(
            experiment=self.experiment, source=self.source, figures=figures, claims=self.claims
        )


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
        preset = msgspec.convert(raw, Preset)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{path}: {exc}") from None
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
