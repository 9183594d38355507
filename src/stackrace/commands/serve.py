"""`stackrace serve NAME…`: start stacks, print their URLs, stop everything on Ctrl-C.

The private MariaDB is started only with `--db` (and a stack that serves /db): serving
/hello needs no database, and starting one unasked takes seconds, a port and, on a
machine without mariadb-server, fails the whole command."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from dataclasses import dataclass

from stackrace.commands._common import add_private_db_arguments, announce, load, resolve_all
from stackrace.commands.db_hook import open_for_stacks
from stackrace.commands.namespace import typed_options
from stackrace.commands.parser import describe, examples
from stackrace.commands.target_args import add_your_app_arguments, your_app_options
from stackrace.settings.parsers import COMMAND_LINE
from stackrace.stacks.app_spec import YourApp
from stackrace.stacks.definition import Stack
from stackrace.stacks.launcher import Launcher
from stackrace.stacks.running import LaunchError, RunningStack
from stackrace.stacks.userapp import default_app_stacks, generated_names
from stackrace.supervise import hurry

EXAMPLES = examples(
    ("stackrace serve uvicorn", "one stack: its URL, then Ctrl-C stops it"),
    ("stackrace serve uvicorn gunicorn-sync", "two stacks, each on a port of its own"),
    ("stackrace serve gunicorn-sync:workers=4", "a variant: four workers"),
    ("stackrace serve --db django", "a stack and the private MariaDB, so /db answers"),
    ("stackrace serve --app examples/flask_app:app", "your app under every server that runs it"),
)


def register(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "Start stacks and print their URLs, to load them with anything (stackrace load, wrk, "
        "a browser); Ctrl-C stops everything it started.",
        EXAMPLES,
        "docs/stacks.md",
    )
    p.add_argument(
        "names", nargs="*", metavar="STACK",
        help="stacks, or variants like gunicorn-sync:workers=4 (`stackrace stacks` lists them)",
    )  # fmt: skip
    add_private_db_arguments(
        p,
        "also start (and seed) the private MariaDB, so that /db answers (only when a chosen "
        "stack serves the db workload; stopped with the stacks)",
    )
    add_your_app_arguments(p.add_argument_group("your app on every server (docs/your-app.md)"))
    p.set_defaults(func=run, read_options=serve_options)


@dataclass(frozen=True)
class ServeOptions:
    """`stackrace serve`'s command line, typed."""

    names: tuple[str, ...]
    db: bool
    stacks_file: str | None
    your_app: YourApp


def serve_options(args: argparse.Namespace) -> ServeOptions:
    return typed_options(ServeOptions, args, your_app=your_app_options(args))


def run(o: ServeOptions) -> int:
    stacks = load(o.stacks_file, o.your_app)
    names = list(o.names)
    if not names:
        names = default_app_stacks(stacks)[0] + [
            n for n in generated_names(stacks) if "[app]" not in n
        ]
    if not names:
        print("stackrace serve: name the stacks (or give --app)", file=sys.stderr)
        return 2
    chosen = resolve_all(names, stacks, named_in=COMMAND_LINE)
    announce(stacks, "stackrace serve")
    opened = open_for_stacks(o.db, chosen)
    if opened is None:
        return 2
    db, env = opened
    if o.db and db is None:
        print("stackrace serve: note: no chosen stack serves /db: no database started")
    try:
        return asyncio.run(_serve(chosen, env))
    finally:
        if db is not None:
            db.close()


async def _serve(chosen: list[Stack], env: dict[str, str]) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def now() -> None:
        print("stopping now (SIGKILL)", file=sys.stderr, flush=True)

    # the first signal stops the stacks gracefully, a second one kills them at once
    handler = hurry.escalating(stop.set, now)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, handler)
    failed = 0
    async with Launcher(env=env) as launcher:
        for stack in chosen:
            try:
                rs = await _start_unless_stopped(launcher, stack, stop)
            except LaunchError as exc:
                failed += 1
                print(f"✗ {exc}", file=sys.stderr)
                continue
            if rs is None:
                # Ctrl-C while a stack was starting: the start was cancelled (the launcher
                # stops what it had started), the remaining stacks are not started
                print("interrupted while starting; stopping…", file=sys.stderr, flush=True)
                return 130
            print(f"✓ {rs.name:<28} {rs.url}{stack.spec.health}   (log: {rs.log_path})", flush=True)
        if failed == len(chosen):
            return 1
        print("serving; Ctrl-C stops everything", flush=True)
        while not stop.is_set():
            for rs in launcher.poll():
                print(f"✗ {rs.name} crashed: {rs.error}\n{rs.log_tail()}", file=sys.stderr)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.5):
                    await stop.wait()
        print("stopping… (Ctrl-C again: kill at once)", flush=True)
    return 1 if failed else 0


async def _start_unless_stopped(
    launcher: Launcher, stack: Stack, stop: asyncio.Event
) -> RunningStack | None:
    """Start one stack, or give up as soon as `stop` is set (Ctrl-C, SIGTERM): a stack
    that will never be ready must not hold the user for its whole ready_timeout."""
    if stop.is_set():
        return None
    start = asyncio.create_task(launcher.start(stack))
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait({start, stopped}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if start.done():
        return start.result()  # (raises its LaunchError)
    start.cancel()
    with contextlib.suppress(asyncio.CancelledError, LaunchError):
        await start
    return None
