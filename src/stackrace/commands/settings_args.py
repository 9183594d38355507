"""The race settings on a command line: each declared setting (settings/race_settings.py,
its `Opt`) as an option, and the options given read back into settings.

The declaration is the settings module's; reading it into argparse is the command
layer's, so that nothing below commands/ knows argparse (a preset, a run file and the
picker fill the same settings from files and keys).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from stackrace.settings.parsers import non_negative_duration, positive_duration, timeout_duration
from stackrace.settings.race_settings import (
    Opt,
    RaceSettings,
    options,
    stacks_named_in,
    with_options,
)


def add_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    skip: tuple[str, ...] = (),
    only: tuple[str, ...] | None = None,
    helps: dict[str, str] | None = None,
    defaults: dict[str, Any] | None = None,
    shorts: dict[str, str] | None = None,
    one_way: dict[str, bool] | None = None,
    parses: dict[str, Callable[[str], Any] | None] | None = None,
) -> None:
    """Add every setting (or `only` these) as an option; unset options stay None (so
    presets can fill in), and each help says the setting's default. `helps`: a
    command's own words for a setting, by field (what --slo does in `load` is not what
    it does in bench); `defaults`: a command's own default, by field, where it has no
    preset to fill in (`load`'s warm-up); `shorts`: a command's short flag for a
    setting (`load -n`, `-d`, as ab and wrk name them); `one_way`: a switch a command
    offers one way only, by field, True for its flag and False for its negation (`load
    --no-keepalive`, `-k/--insecure`: wrk's and curl's, their other way the default);
    `parses`: a command's own parser for a setting, by field, None for the text as
    given (`load --rate`: one target's rate, with no per-stack ceiling; `--clients`:
    the engine's profile itself; `--cacert`: the file checked by load after the parse)."""
    declared = RaceSettings()
    for name, o in options().items():
        if name in skip or (only is not None and name not in only):
            continue
        text = (helps or {}).get(name, o.help)
        value = getattr(declared, name)
        way = (one_way or {}).get(name)
        if o.negate and way is not None:
            short = (shorts or {}).get(name)
            one = o.flag if way else o.negate
            parser.add_argument(
                *((short, one) if short else (one,)),
                dest=name,
                action="store_true" if way else "store_false",
                default=(defaults or {}).get(name, value),
                help=text if name in (helps or {}) else (o.help if way else o.negate_help),
            )
            continue
        if o.negate:
            group = parser.add_mutually_exclusive_group()
            on = f"{text} (the default)" if value else text
            off = f"{o.negate_help} (the default)" if not value else o.negate_help
            group.add_argument(o.flag, dest=name, action="store_true", default=None, help=on)
            group.add_argument(o.negate, dest=name, action="store_false", default=None, help=off)
            continue
        short = (shorts or {}).get(name, o.short)
        flags = [short, o.flag] if short else [o.flag]
        parser.add_argument(
            *flags,
            dest=name,
            default=(defaults or {}).get(name),
            metavar=o.metavar,
            # our parsers raise ValueError with the reason: OneLineArgumentParser shows it
            type=(parses or {}).get(name, o.parse) or str,  # str: the text as given
            help=_with_default(text, o, value),
            action="append" if o.repeat else "store",
        )


def add_preset_argument(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, help: str
) -> None:
    """--preset NAME: a stored scenario's settings and stacks, under the options given
    (the app, bench)."""
    parser.add_argument("--preset", metavar="NAME", help=help)


_DURATIONS = (positive_duration, non_negative_duration, timeout_duration)


def _with_default(text: str, o: Opt, value: Any) -> str:
    """The help with the setting's default said, unless it says one already or the
    setting has none (None, an empty list: not set)."""
    if "default" in text or value is None or value == []:
        return text
    if o.parse in _DURATIONS:
        shown = f"{value:g}s"
    elif isinstance(value, list):
        shown = ",".join(str(v) for v in value)
    else:
        shown = str(value)
    return f"{text} (default {shown})"


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


def with_given(base: RaceSettings, given: Mapping[str, Any], app_given: bool) -> RaceSettings:
    """`base` with the settings given on this command line (race_settings.with_options:
    the one rule bench, tune and the app merge a preset with options by); `app_given`:
    --app was given."""
    return with_options(base, dict(given), app_given=app_given)


def stacks_written_in(
    given: Mapping[str, Any], preset_file: Path | None, run_file: str | None
) -> str:
    """Where the race's stacks were written (race_settings.stacks_named_in)."""
    return stacks_named_in("stacks" in given, preset_file, run_file)
