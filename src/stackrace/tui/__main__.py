"""`python -m stackrace.tui [--url URL [--pid PID]] [--demo]`: the app with its own options.

`stackrace` (no subcommand) opens the same app; this entry point also accepts the
options the top-level parser does not define yet.
"""

from __future__ import annotations

import argparse
import sys

from stackrace.tui.args import add_app_arguments


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stackrace.tui")
    parser.add_argument("--stacks-file", default=None, help="stacks.toml to use")
    add_app_arguments(parser)
    args = parser.parse_args(argv)
    from stackrace.tui.app import run_app

    return run_app(args)


if __name__ == "__main__":
    sys.exit(main())
