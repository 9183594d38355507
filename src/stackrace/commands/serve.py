"""`stackrace serve NAME…`: start stacks, print their URLs, stop everything on Ctrl-C."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys

from stackrace.commands._common import load, resolve_all
from stackrace.config import DB_WORKLOADS
from stackrace.stacks.launcher import Launcher, LaunchError


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("names", nargs="+", help="stacks (or variants like gunicorn-sync:workers=4)")
    p.add_argument("--no-db", action="store_true", help="do not start the private MariaDB for /db")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    stacks = load(args)
    if stacks is None:
        return 2
    chosen = resolve_all(args.names, stacks)
    if chosen is None:
        return 2
    db = None
    env: dict[str, str] = {}
    if any(s.serves(w) for s in chosen for w in DB_WORKLOADS) and not args.no_db:
        from stackrace.commands.db_hook import open_for_workload

        opened = open_for_workload()
        if opened is None:
            return 2
        db, env = opened
    try:
        return asyncio.run(_serve(chosen, env))
    finally:
        if db is not None:
            db.close()


async def _serve(chosen, env: dict[str, str]) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    failed = 0
    async with Launcher(env=env) as launcher:
        for stack in chosen:
            try:
                rs = await launcher.start(stack)
            except LaunchError as exc:
                failed += 1
                print(f"✗ {exc}", file=sys.stderr)
                continue
            print(f"✓ {rs.name:<28} {rs.url}/hello   (log: {rs.log_path})", flush=True)
        if failed == len(chosen):
            return 1
        print("serving; Ctrl-C stops everything", flush=True)
        while not stop.is_set():
            for rs in launcher.poll():
                print(f"✗ {rs.name} crashed: {rs.error}\n{rs.log_tail()}", file=sys.stderr)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)
        print("stopping…", flush=True)
    return 1 if failed else 0
