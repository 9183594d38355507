"""`stackrace tune`'s command line read into its frozen `TuneOptions` (its flags are
added by commands/tune.py `register`), and the settings each probe is measured with.
Nothing past this module knows argparse."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field

from stackrace.commands import runguard
from stackrace.commands.bench_args import RaceOptions, race_options
from stackrace.commands.namespace import typed_options
from stackrace.commands.output_args import OutputFiles, output_options


@dataclass(frozen=True)
class TuneOptions:
    """`stackrace tune`'s command line, typed."""

    race: RaceOptions
    named: tuple[str, ...] = ()  # the stacks to tune, as named
    budget: float | None = None  # seconds
    precision: float | None = None
    workers: str | None = None  # --workers LIST, as given
    threads: str | None = None
    files: OutputFiles = field(default_factory=OutputFiles)
    no_progress: bool = False
    guard: runguard.RunGuardOptions = field(default_factory=runguard.RunGuardOptions)


def tune_options(args: argparse.Namespace) -> TuneOptions:
    return typed_options(
        TuneOptions, args, race=race_options(args), named=tuple(args.stack),
        workers=args.tune_workers, threads=args.tune_threads, files=output_options(args),
        guard=runguard.run_guard_options(args),
    )  # fmt: skip


def probe_settings(given: Mapping[str, object], servers: list[str]) -> dict[str, object]:
    """The settings tune measures each probe with: one configuration at a time, on cores
    of its own; a probe's longest duration 2 s (it ends as soon as it has its answers)
    and no warm-up unless given; the stacks its servers."""
    out = {k: v for k, v in given.items() if k != "stacks"}
    out["isolation"] = "rotate"
    out.setdefault("duration", 2.0)
    out.setdefault("warmup", 0.0)
    if servers:
        out["stacks"] = servers
    return out
