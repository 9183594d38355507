"""The race settings on a command line: each declared setting (settings/race_settings.py,
its `Opt`) as an option, and the options given read back into settings.

The declaration is the settings module's; reading it into argparse is the command
layer's, so that nothing below commands/ knows argparse (a preset, a run file and the
picker fill the same settings from files and keys).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from stackrace.settings.race_settings import (
    RaceSettings,
    options,
    stacks_named_in,
    with_options,
)


def add_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    skip: tuple[str, ...] = (),
    only: tuple[str, ...] | None = None,
) -> None:
    """Add every setting (or `only` these) as an option; unset options stay None (so
    presets can fill in)."""
    for name, o in options().items():
        if name in skip or (only is not None and name not in only):
            continue
        if o.negate:
            group = parser.add_mutually_exclusive_group()
            group.add_argument(o.flag, dest=name, action="store_true", default=None, help=o.help)
            group.add_argument(o.negate, dest=name, action="store_false", default=None)
            continue
        flags = [o.short, o.flag] if o.short else [o.flag]
        parser.add_argument(
            *flags,
            dest=name,
            default=None,
            metavar=o.metavar,
            # our parsers raise ValueError with the reason: OneLineArgumentParser shows it
            type=o.parse or str,  # str: the text as given (argparse's default)
            help=o.help,
            action="append" if o.repeat else "store",
        )


def given(args: argparse.Namespace, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The settings given on the command line (those left unset are absent); `skip`:
    fields whose names the front end's own options reuse (the app's `-c`)."""
    out = {}
    for name in options():
        if name in skip:
            continue
        value = getattr(args, name, None)
        if value is not None:
            out[name] = value
    if isinstance(out.get("stacks"), str):
        out["stacks"] = [out["stacks"]]
    return out


def with_given(
    base: RaceSettings, args: argparse.Namespace, skip: tuple[str, ...] = ()
) -> RaceSettings:
    """`base` with the options given on this command line (race_settings.with_options:
    the one rule bench, tune and the app merge a preset with options by)."""
    return with_options(base, given(args, skip), app_given=bool(getattr(args, "app", None)))


def stacks_written_in(
    args: argparse.Namespace, preset_file: Path | None, run_file: str | None
) -> str:
    """Where the race's stacks were written (race_settings.stacks_named_in)."""
    return stacks_named_in(getattr(args, "stacks", None) is not None, preset_file, run_file)
