"""`stackrace verify [NAME…]`: start each stack and check every endpoint, TechEmpower-style."""

from __future__ import annotations

import argparse
import asyncio
import ssl
import sys
import time

from stackrace.commands._common import load, resolve_all
from stackrace.config import DB_WORKLOADS, Stack, placeholders, render
from stackrace.stacks import probe
from stackrace.stacks.availability import check as availability
from stackrace.stacks.launcher import Launcher, LaunchError, RunningStack
from stackrace.stacks.sampler import TreeSampler
from stackrace.stacks.verify import (
    MEASURED_WITH_DB,
    Check,
    check_db,
    check_dbjson,
    check_facts,
    verify_port,
)
from stackrace.units import fmt_bytes


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("names", nargs="*", help="stacks to verify (default: all available)")
    p.add_argument(
        "--include-unavailable", action="store_true", help="try stacks that look unavailable too"
    )
    p.add_argument(
        "--no-db",
        action="store_true",
        help="skip /db (otherwise the private MariaDB is started and seeded for it)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    stacks = load(args)
    if stacks is None:
        return 2
    chosen = resolve_all(args.names or list(stacks), stacks)
    if chosen is None:
        return 2
    db = None
    env: dict[str, str] = {}
    if not args.no_db and any(s.serves(w) for s in chosen for w in DB_WORKLOADS):
        from stackrace.commands.db_hook import open_for_workload

        opened = open_for_workload(private=True)
        if opened is None:
            return 2
        db, env = opened
    try:
        return asyncio.run(
            _verify(
                chosen, explicit=bool(args.names), force=args.include_unavailable, db=db, env=env
            )
        )
    finally:
        if db is not None:
            db.close()


async def _verify(chosen, explicit: bool, force: bool, db=None, env=None) -> int:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(header_style="bold")
    columns = ("stack", "hello", "json", "io", "db", "dbjson", "facts", "ready in")
    for col in (*columns, "idle rss / uss", "result"):
        table.add_column(col)
    bad = 0
    # the full story of each stack that failed, printed under the table (a table cell
    # is too narrow for a reason and a log tail)
    details: list[tuple[str, list[str]]] = []
    db_conn = db.connection() if db is not None else None
    async with Launcher(env=env) as launcher:
        for stack in chosen:
            a = availability(stack)
            if not a.available and not force:
                if explicit:
                    bad += 1
                table.add_row(stack.name, *["-"] * 8, "unavailable", style="dim")
                details.append((stack.name, [f"unavailable: {a.reason}", f"fix: {a.fix}"]))
                continue
            t0 = time.monotonic()
            try:
                rs = await launcher.start(stack)
            except LaunchError as exc:
                bad += 1
                table.add_row(stack.name, *["✗"] * 6, "-", "-", "did not start", style="red")
                details.append((stack.name, str(exc).splitlines()))
                continue
            ready = time.monotonic() - t0
            tls = probe.trusting(rs.cert) if rs.cert is not None else None
            checks = await verify_port(rs.port, tls=tls)
            extra = await _extra_checks(stack, rs, db_conn, tls)
            checks += [c for c in extra.values() if c is not None]
            marks = ["-" if c is None else "✓" if c.ok else "✗" for c in extra.values()]
            mem = TreeSampler(rs.root_pids).sample()
            await launcher.stop(rs)
            problems = [f"{c.endpoint}: {p}" for c in checks for p in c.problems]
            bad += bool(problems)
            if problems:
                details.append((stack.name, [*problems, f"log: {rs.log_path}"]))
            table.add_row(
                stack.name,
                *("✓" if c.ok else "✗" for c in checks[:3]),
                *marks,
                f"{ready:.2f}s",
                f"{fmt_bytes(mem.rss)} / {fmt_bytes(mem.uss)}",
                f"{len(problems)} problem{'s' * (len(problems) != 1)}" if problems else "ok",
                style="red" if problems else None,
            )
    if db_conn is not None:
        db_conn.close()
    console.print(table)
    for name, lines in details:
        print(f"\n✗ {name}")
        for line in lines:
            print(f"    {line}")
    print(f"{len(chosen) - bad} of {len(chosen)} stacks verified", file=sys.stderr)
    return 1 if bad else 0


async def _extra_checks(
    stack: Stack, rs: RunningStack, db_conn, tls: ssl.SSLContext | None = None
) -> dict[str, Check | None]:
    """/db, /dbjson and the stack's `expect` (facts), in the table's order; None where a
    check does not apply (the stack does not serve it, or there is no database)."""
    out: dict[str, Check | None] = dict.fromkeys(("db", "dbjson", "facts"))
    measured: dict[str, str] = {}
    if db_conn is not None and stack.serves("db"):
        served_by = stack.upstream or stack  # behind a proxy, the backend holds connections
        out["db"] = await check_db(rs.port, db_conn, served_by.workers * served_by.threads, tls=tls)
        measured.update(out["db"].measured)
    if db_conn is not None and stack.serves("dbjson"):
        out["dbjson"] = await check_dbjson(rs.port, db_conn, tls=tls)
    spec = stack.spec
    if spec.expect:
        values = placeholders(stack, rs.port, rs.run_dir)
        expect = {k: render(v, values) for k, v in spec.expect.items()}
        if db_conn is None:  # facts only the database can show are not checked without it
            expect = {k: v for k, v in expect.items() if k not in MEASURED_WITH_DB}
        if expect:
            out["facts"] = await check_facts(rs.port, spec.facts, expect, measured, tls=tls)
    return out
