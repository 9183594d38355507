"""`stackrace` with no subcommand: open the live comparator (the Textual app)."""

from __future__ import annotations

import argparse
import sys


def run(args: argparse.Namespace) -> int:
    from stackrace.config import ConfigError, load_stacks

    try:
        load_stacks(args.stacks_file)
    except ConfigError as exc:
        if not getattr(args, "url", None):
            print(f"stackrace: {exc}", file=sys.stderr)
            return 2
    from stackrace.tui.app import run_app

    return run_app(args)
