"""Every command's --help prints: argparse formats a help string with `%`, so a bare `%`
in one (a default such as `failures>0.1%`) crashed `bench --help` with exit 70."""

from __future__ import annotations

import argparse

from stackrace.cli import build_parser


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    out = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out += _parsers(sub)
    return out


def test_every_commands_help_formats() -> None:
    parsers = _parsers(build_parser())
    assert len(parsers) > 10  # the app's own options and every subcommand
    for p in parsers:
        text = p.format_help()
        assert p.prog in text
