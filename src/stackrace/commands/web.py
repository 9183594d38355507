"""`stackrace web`: the same app in a browser (textual-serve), for a projector.

    stackrace web --demo --go --stacks gunicorn-sync,uvicorn      # then open the URL shown

Every browser page runs its own app process (`python -m stackrace` with the same app
options), so it has its own stacks: they stop when the page is closed (textual-serve
tells the app to quit, and the app stops every stack on its way out) and when the
server stops (Ctrl-C ends each page's app the same way; a server killed outright closes
the apps' pipes, and the launcher's watchdog stops their stacks).

Bound to 127.0.0.1. Anyone who can open the page can start servers and send load from
this machine, so the page has an owner (stackrace.base.webgate): the URL printed at start
carries a random token, and a request without it, from a page of another origin, or
naming a host that is not this server's, is refused (403) before any app starts; at
most `--max-sessions` pages run at once. An address other hosts can reach
(`--host 0.0.0.0`, a LAN address) needs its own flag, `--web-remote`, as `--metrics`
needs `--metrics-remote`, keeps the token, and is printed with a warning. The port is
bound before anything else starts: a port in use is one line. A `--public-url` that is
not http(s) with a host, and more than 64 `--max-sessions`, are refused in one line;
the token is in the one line that hands out the URL and in no log line after it.
"""

from __future__ import annotations

import argparse
import errno
import shlex
import socket
import sys
from dataclasses import dataclass

from stackrace.base.netguard import RemoteTargetError, is_loopback
from stackrace.base.webgate import (
    DEFAULT_MAX_SESSIONS,
    MAX_SESSIONS_CAP,
    max_sessions_problem,
    public_url_problem,
)
from stackrace.commands._common import announce
from stackrace.commands.app_args import add_app_arguments
from stackrace.commands.namespace import typed_options
from stackrace.commands.parser import describe, examples
from stackrace.settings.parsers import positive_int
from stackrace.stacks.definition import ConfigError
from stackrace.stacks.resolved import resolve_run

# web's own options, and whether each takes a value: not passed on to the pages' app
WEB_ONLY = {
    "--host": True,
    "--port": True,
    "--public-url": True,
    "--web-remote": False,
    "--max-sessions": True,
}


EXAMPLES = examples(
    ("stackrace web", "the app in a browser, at http://127.0.0.1:8566"),
    ("stackrace web --port 9000 --demo", "another port; the app's options pass on to it"),
    (
        "stackrace web --host 0.0.0.0 --web-remote --public-url https://race.example",
        "reachable from other hosts, behind a proxy",
    ),
)


def register(parser: argparse.ArgumentParser) -> None:
    describe(
        parser,
        "Serve the app in a browser (textual-serve), on 127.0.0.1 by default; the app's "
        "options below are passed on to each page's app.",
        EXAMPLES,
        "docs/tui.md",
    )
    web = parser.add_argument_group("where it listens")
    web.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; any other "
        "address needs --web-remote)",
    )
    web.add_argument(
        "--web-remote",
        action="store_true",
        help="let --host be an address other hosts can reach: whoever opens the page "
        "can start servers and send load from this machine",
    )
    web.add_argument("--port", type=_port, default=8566, help="port (default 8566)")
    web.add_argument(
        "--public-url",
        default=None,
        metavar="URL",
        help="the URL browsers use, when behind a proxy: http:// or https:// with a host "
        "(default: http://HOST:PORT)",
    )
    web.add_argument(
        "--max-sessions",
        type=positive_int,
        default=DEFAULT_MAX_SESSIONS,
        help=f"pages open at once, each with its own stacks (default {DEFAULT_MAX_SESSIONS}, "
        f"at most {MAX_SESSIONS_CAP})",
    )
    add_app_arguments(parser)
    parser.set_defaults(func=run, read_options=web_options)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a port number, got {text!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be 1 to 65535, got {port}")
    return port


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
            skip = WEB_ONLY[name] and "=" not in arg
            continue
        out.append(arg)
    return shlex.join([sys.executable, "-m", "stackrace", *out])


def check_address(host: str, port: int, remote: bool) -> str | None:
    """None when `web` may listen there, else the one line that says why not."""

    try:
        local = is_loopback(host)
    except RemoteTargetError as exc:
        return f"--host {exc}"
    if not local and not remote:
        return (
            f"--host {host}: not a loopback address; whoever opens the page there can start "
            "servers and send load from this machine: add --web-remote to mean it"
        )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return f"--port {port}: already in use on {host}"
            if exc.errno == errno.EADDRNOTAVAIL:
                return f"--host {host}: not an address of this machine"
            return f"--host {host} --port {port}: cannot listen there: {exc.strerror or exc}"
    return None


@dataclass(frozen=True)
class WebOptions:
    """`stackrace web`'s command line, typed (the app's options ride along in `argv`)."""

    host: str
    port: int
    public_url: str | None
    max_sessions: int
    web_remote: bool
    demo: bool
    urls: tuple[str, ...]
    stacks_file: str | None
    argv: tuple[str, ...] = ()


def web_options(args: argparse.Namespace) -> WebOptions:
    return typed_options(WebOptions, args, urls=tuple(args.url or ()))


def run(o: WebOptions) -> int:
    from stackrace.tui.web import serve  # lazy: textual-serve, only when serving

    problem = (
        (public_url_problem(o.public_url) if o.public_url is not None else None)
        or max_sessions_problem(o.max_sessions)
        or check_address(o.host, o.port, o.web_remote)
    )
    if problem:
        print(f"stackrace web: {problem}", file=sys.stderr)
        return 2
    if o.web_remote:
        print(
            f"stackrace web: warning: listening on {o.host}:{o.port}, reachable from "
            "other hosts: anyone who opens the page can start servers and send load from "
            "this machine",
            file=sys.stderr,
        )
    if not o.demo:  # the pages' stacks come from these files
        try:
            announce(resolve_run(o.stacks_file).stacks(), "stackrace web")
        except ConfigError:
            if not o.urls:  # servers given by URL need no stacks file (cli.py says why)
                raise
    argv = list(o.argv) or sys.argv[1:]
    return serve(
        app_command(argv),
        o.host,
        o.port,
        o.public_url,
        loopback=_loopback(o.host),
        max_sessions=o.max_sessions,
    )


def _loopback(host: str) -> bool:
    try:
        return is_loopback(host)
    except RemoteTargetError:
        return False
