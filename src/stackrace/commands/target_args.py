"""What is raced besides the catalogue's stacks, on a command line: your app (`--app` and
its interpreter, directory, environment), your commands (`--cmd`) and servers stackrace
did not start (`--url`, `--pid`), read into the typed `YourApp` (stacks/app_spec.py) and
URL lists (race/core/urls.py `url_targets`); `TargetOptions` is the typed group.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from stackrace.commands.namespace import typed_options
from stackrace.settings.parsers import positive_int
from stackrace.stacks.app_spec import YourApp


def add_url_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--url and --pid, for the app and bench alike."""
    parser.add_argument(
        "--url",
        action="append",
        metavar="[NAME=]URL",
        help="also race a server stackrace did not start (repeatable), named NAME (default: "
        "its host:port): the URL as given; with no path (http://host:port) the workload's "
        "path or your requests (--path, --scenario). Loopback only unless --allow-remote",
    )
    parser.add_argument(
        "--pid",
        action="append",
        type=positive_int,
        metavar="PID",
        help="the process behind the matching --url (the Nth --pid goes with the Nth "
        "--url), for its memory and CPU; without one they are not sampled",
    )


def add_your_app_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The options that race a user's app (the app, bench, serve, verify)."""
    parser.add_argument(
        "--app",
        metavar="MODULE:ATTR",
        help="your WSGI or ASGI app (main:app, pkg.wsgi:application, path/app.py:app): "
        "race it under every server that can run it, as SERVER[app]",
    )
    kind = (
        parser.add_mutually_exclusive_group()
        if isinstance(parser, argparse.ArgumentParser)
        else parser
    )
    kind.add_argument(
        "--wsgi",
        dest="app_interface",
        action="store_const",
        const="wsgi",
        help="the app is WSGI (default: detected)",
    )
    kind.add_argument(
        "--asgi",
        dest="app_interface",
        action="store_const",
        const="asgi",
        help="the app is ASGI (default: detected)",
    )
    parser.add_argument(
        "--app-dir",
        metavar="DIR",
        help="the app's working directory, on its import path (default: the current one)",
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="the interpreter that can import the app (default: the active virtualenv's, "
        "else the one stackrace runs on)",
    )
    parser.add_argument(
        "--env", action="append", metavar="KEY=VALUE", help="environment for the app (repeatable)"
    )
    parser.add_argument("--env-file", metavar="FILE", help="a .env file for the app")
    parser.add_argument(
        "--cmd",
        action="append",
        metavar="'NAME=COMMAND'",
        help="add a stack for this run from a command template, e.g. "
        "'node-app=node server.js --port {port}' (repeatable; placeholders as in stacks.toml)",
    )


@dataclass(frozen=True)
class TargetOptions:
    """What is raced besides the catalogue's stacks: servers given by URL (each with
    its process, when given) and your app or commands."""

    urls: tuple[str, ...] = ()  # --url [NAME=]URL
    pids: tuple[int, ...] = ()  # --pid, the Nth with the Nth --url
    allow_remote: bool = False
    your_app: YourApp = field(default_factory=YourApp)


def target_options(args: argparse.Namespace) -> TargetOptions:
    """The target flags as given (a command without one of them: its default)."""
    return typed_options(
        TargetOptions,
        args,
        urls=tuple(getattr(args, "url", None) or ()),
        pids=tuple(getattr(args, "pid", None) or ()),
        your_app=your_app_options(args),
    )


def your_app_options(args: argparse.Namespace) -> YourApp:
    """The app and commands these flags ask for (none: an empty `YourApp`)."""
    return typed_options(
        YourApp,
        args,
        interface=getattr(args, "app_interface", None),
        cmds=tuple(getattr(args, "cmd", None) or ()),
    )
