"""`stackrace web`: the same app in a browser (textual-serve), for a projector.

    stackrace web --demo --go --stacks gunicorn-sync,uvicorn      # then open the URL shown

Every browser page runs its own app process (`python -m stackrace` with the same app
options), so it has its own stacks: they stop when the page is closed (textual-serve
tells the app to quit, and the app stops every stack on its way out) and when the
server stops (Ctrl-C ends each page's app the same way; a server killed outright closes
the apps' pipes, and the launcher's watchdog stops their stacks). Bound to 127.0.0.1
unless `--host` says otherwise: the app starts servers and load on this machine.
"""

from __future__ import annotations

import argparse
import shlex
import sys

WEB_ONLY = {"--host": True, "--port": True, "--public-url": True}


def register(parser: argparse.ArgumentParser) -> None:
    from stackrace.tui.args import add_app_arguments

    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only)",
    )
    parser.add_argument("--port", type=int, default=8566, help="port (default 8566)")
    parser.add_argument(
        "--public-url", default=None, help="the URL browsers use, when behind a proxy"
    )
    add_app_arguments(parser)
    parser.set_defaults(func=run)


def app_command(argv: list[str]) -> str:
    """The shell command each browser page runs: this stackrace with the app's options
    (everything given to `web` except its own options)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "web":
            continue
        name = arg.split("=", 1)[0]
        if name in WEB_ONLY:
            skip = "=" not in arg
            continue
        out.append(arg)
    return shlex.join([sys.executable, "-m", "stackrace", *out])


def run(args: argparse.Namespace) -> int:
    from stackrace.tui.web import serve

    argv = getattr(args, "argv", None) or sys.argv[1:]
    return serve(app_command(argv), args.host, args.port, args.public_url)
