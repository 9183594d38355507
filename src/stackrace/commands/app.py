"""`stackrace` with no subcommand: open the live comparator (the Textual app)."""

from __future__ import annotations

import argparse
import importlib.util
import sys


def run(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("stackrace.tui.app") is not None:
        from stackrace.config import ConfigError, load_stacks

        try:
            load_stacks(args.stacks_file)
        except ConfigError as exc:
            if not getattr(args, "url", None):
                print(f"stackrace: {exc}", file=sys.stderr)
                return 2
        from stackrace.tui.app import run_app

        return run_app(args)
    return _demo()


def _demo() -> int:
    """Until the TUI exists: a headless load against a local aiohttp server we start."""
    import subprocess
    import sys
    import time

    from stackrace.cli import main

    server = subprocess.Popen(
        [sys.executable, "-m", "stackrace.demo_server", "18999"],
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        time.sleep(0.8)
        return main(["load", "http://127.0.0.1:18999/hello", "-c", "50", "-d", "5s"])
    finally:
        server.terminate()
        server.wait()
