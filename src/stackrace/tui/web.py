"""The app in a browser: textual-serve runs one app process per page (see
`stackrace.commands.web` for the command each page runs and how its stacks stop)."""

from __future__ import annotations

import sys


def serve(command: str, host: str, port: int, public_url: str | None) -> int:
    """Serve `command` (a shell command running the app) until Ctrl-C; an exit code."""
    try:
        from textual_serve.server import Server
    except ImportError:
        print(
            "stackrace web: textual-serve is not installed (pip install textual-serve)",
            file=sys.stderr,
        )
        return 2
    try:
        Server(command, host=host, port=port, title="stackrace", public_url=public_url).serve()
    except OSError as exc:  # the address cannot be bound (taken since the check, not ours)
        print(
            f"stackrace web: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr
        )
        return 2
    return 0
