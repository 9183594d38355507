"""`stackrace verify [NAME…]`: start each stack and check every endpoint, TechEmpower-style.

/db and /dbjson are checked with `--db`: they need a private MariaDB (started, seeded,
removed again), which a check of /hello, /json and /io must not cost (nor fail on, on a
machine without mariadb-server). Without it the table says "-" in those columns and a
note says how to check them."""

from __future__ import annotations

import argparse
import asyncio
import ssl
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from stackrace.base import printable
from stackrace.commands._common import (
    add_private_db_arguments,
    announce,
    load,
    resolve_all,
    trusted_names,
)
from stackrace.commands.db_hook import open_for_stacks
from stackrace.commands.namespace import typed_options
from stackrace.commands.parser import describe, examples
from stackrace.commands.settings_args import add_options, given
from stackrace.commands.target_args import add_your_app_arguments, your_app_options
from stackrace.settings import statuses
from stackrace.settings.parsers import COMMAND_LINE
from stackrace.settings.race_settings import RaceSettings, merge, options
from stackrace.settings.units import fmt_bytes
from stackrace.stacks import probe
from stackrace.stacks.app_spec import YourApp
from stackrace.stacks.availability import Availability, availability
from stackrace.stacks.definition import DB_WORKLOADS, Stack
from stackrace.stacks.launcher import Launcher
from stackrace.stacks.placeholders import placeholders, render
from stackrace.stacks.running import LaunchError, RunningStack
from stackrace.stacks.sampler import TreeSampler
from stackrace.stacks.userapp import COMMON, default_app_stacks, generated_names
from stackrace.stacks.verify import (
    MEASURED_WITH_DB,
    Check,
    check_db,
    check_dbjson,
    check_facts,
    verify_port,
)
from stackrace.stacks.verify_h2 import verify_h2

if TYPE_CHECKING:  # type-only: rich is imported where a table is drawn (keeps start-up fast)
    from rich.table import Table

EXAMPLES = examples(
    ("stackrace verify gunicorn-sync", "start it and check every endpoint's answers"),
    ("stackrace verify uvicorn aiohttp", "several stacks"),
    ("stackrace verify --db django", "/db and /dbjson too, against a MariaDB of its own"),
    ("stackrace verify --app examples/flask_app:app --path /", "your app, on every server"),
)


def register(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "Start stacks and check every endpoint against the contract (docs/stacks.md): the "
        "answers a race would count, before a race counts them.",
        EXAMPLES,
        "docs/stacks.md",
    )
    p.add_argument(
        "names", nargs="*", metavar="STACK", help="stacks to verify (default: all available)"
    )
    p.add_argument(
        "--include-unavailable", action="store_true", help="try stacks that look unavailable too"
    )
    add_private_db_arguments(
        p,
        "check /db and /dbjson too, against a private MariaDB of the command's own (started "
        "and seeded for it, on a free port, removed at the end)",
    )
    own = add_your_app_arguments
    group = p.add_argument_group("your app: check your requests on every server, nothing else")
    own(group)
    add_options(group, skip=tuple(k for k in options() if k not in _REQUEST_FIELDS))
    p.set_defaults(func=run, read_options=verify_options)


# the settings that describe your requests (--path, --scenario, and their shape)
_REQUEST_FIELDS = ("paths", "method", "header", "body", "body_file", "scenario", "expect_status")


@dataclass(frozen=True)
class VerifyOptions:
    """`stackrace verify`'s command line, typed."""

    names: tuple[str, ...]
    include_unavailable: bool
    db: bool
    given: Mapping[str, Any]
    stacks_file: str | None
    your_app: YourApp


def verify_options(args: argparse.Namespace) -> VerifyOptions:
    return typed_options(VerifyOptions, args, given=given(args), your_app=your_app_options(args))


def run(o: VerifyOptions) -> int:
    if o.your_app.app or o.your_app.cmds:
        return _run_own(o)
    stacks = load(o.stacks_file, o.your_app)
    chosen = resolve_all(
        o.names or trusted_names(stacks, "stackrace verify"),
        stacks,
        named_in=COMMAND_LINE,
    )
    announce(stacks, "stackrace verify")
    opened = open_for_stacks(o.db, chosen, private=True)
    if opened is None:
        return 2
    db, env = opened
    try:
        return asyncio.run(
            _verify(chosen, explicit=bool(o.names), force=o.include_unavailable, db=db, env=env)
        )
    finally:
        if db is not None:
            db.close()


async def _verify(chosen, explicit: bool, force: bool, db=None, env=None) -> int:
    from rich.console import Console  # lazy: keeps --help fast
    from rich.table import Table  # lazy: keeps --help fast

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
                _unavailable_row(table, details, stack, a, blanks=8)
                continue
            started = await _start_or_row(launcher, stack, table, details, crosses=6, dashes=2)
            if started is None:
                bad += 1
                continue
            rs, ready = started
            tls = probe.trusting(rs.cert) if rs.cert is not None else None
            if stack.http != "1.1":  # an h2 variant: its contract read over h2 by the engine
                cert = str(rs.cert) if rs.cert is not None else None
                checks = await verify_h2(rs.url, cert)
                # /db, /dbjson and facts are the h1 stack's: the variant changes its protocol only
                extra: dict[str, Check | None] = dict.fromkeys(("db", "dbjson", "facts"))
            else:
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
                printable.markup(stack.name),
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
        print(f"\n✗ {printable.terminal(name)}")
        for line in lines:  # a launch failure's log tail, a server's answer: never raw
            print(f"    {printable.terminal(line)}")
    if db is None and any(s.serves(w) for s in chosen for w in DB_WORKLOADS):
        print("/db and /dbjson were not checked: add --db (starts a private MariaDB)")
    print(f"{len(chosen) - bad} of {len(chosen)} stacks verified", file=sys.stderr)
    return 1 if bad else 0


def _unavailable_row(
    table: Table, details: list[tuple[str, list[str]]], stack: Stack, a: Availability, blanks: int
) -> None:
    """The row of a stack not verified because it is not installed (`blanks` cells of
    "-" before the result), and why with the fix under the table."""
    table.add_row(printable.markup(stack.name), *["-"] * blanks, "unavailable", style="dim")
    details.append((stack.name, [f"unavailable: {a.reason}", f"fix: {a.fix}"]))


async def _start_or_row(
    launcher: Launcher,
    stack: Stack,
    table: Table,
    details: list[tuple[str, list[str]]],
    crosses: int,
    dashes: int,
) -> tuple[RunningStack, float] | None:
    """Start `stack`: the running stack and how long it took to be ready, or None when it
    did not start, its row written (`crosses` cells of ✗, then `dashes` of "-") and the
    launcher's reason under the table. Both verify tables start a stack this one way."""
    t0 = time.monotonic()
    try:
        rs = await launcher.start(stack)
    except LaunchError as exc:
        table.add_row(
            printable.markup(stack.name),
            *["✗"] * crosses,
            *["-"] * dashes,
            "did not start",
            style="red",
        )
        details.append((stack.name, str(exc).splitlines()))
        return None
    return rs, time.monotonic() - t0


async def _extra_checks(
    stack: Stack, rs: RunningStack, db_conn, tls: ssl.SSLContext | None = None
) -> dict[str, Check | None]:
    """/db, /dbjson and the stack's `expect` (facts), in the table's order; None where a
    check does not apply (the stack does not serve it, or there is no database)."""
    out: dict[str, Check | None] = dict.fromkeys(("db", "dbjson", "facts"))
    measured: dict[str, str] = {}
    if db_conn is not None and stack.serves("db"):
        served_by = stack.upstream or stack  # behind a proxy, the backend holds connections
        db_check = await check_db(rs.port, db_conn, served_by.workers * served_by.threads, tls=tls)
        out["db"] = db_check
        measured.update(db_check.measured)
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


def _run_own(o: VerifyOptions) -> int:
    """`verify --app` (or --cmd): each server of your app answers each of your requests
    with its expected status (2xx unless told), once; nothing of the shipped contract."""

    settings = merge(RaceSettings(), dict(o.given))  # given: by field name
    if not settings.own_requests:
        settings = msgspec.structs.replace(settings, paths=["/"])
    kinds = settings.request_kinds() or []
    stacks = load(o.stacks_file, o.your_app, settings)
    names = o.names or (
        generated_names(stacks)
        if o.include_unavailable
        else [*default_app_stacks(stacks)[0], *default_app_stacks(stacks)[1]]
        + [n for n in generated_names(stacks) if "[app]" not in n]
    )
    chosen = resolve_all(names, stacks, named_in=COMMAND_LINE)
    announce(stacks, "stackrace verify")
    return asyncio.run(_verify_own(chosen, kinds, explicit=bool(o.names)))


async def _verify_own(chosen: list[Stack], kinds, explicit: bool) -> int:
    from rich.console import Console  # lazy: keeps --help fast
    from rich.table import Table  # lazy: keeps --help fast

    escape, terminal = printable.markup, printable.terminal

    table = Table(header_style="bold")
    for col in ("stack", *(k.label for k in kinds), "ready in", "result"):
        table.add_column(escape(col))
    bad = 0
    skipped = 0  # not installed and not asked for by name: not verified, not a failure
    details: list[tuple[str, list[str]]] = []
    async with Launcher() as launcher:
        for stack in chosen:
            a = availability(stack)
            if not a.available:
                bad += explicit
                skipped += not explicit
                _unavailable_row(table, details, stack, a, blanks=len(kinds) + 1)
                continue
            started = await _start_or_row(
                launcher, stack, table, details, crosses=len(kinds), dashes=1
            )
            if started is None:
                bad += 1
                continue
            rs, ready = started
            marks, problems = [], []
            for k in kinds:
                want = statuses.parse(k.expect or "2xx")
                try:
                    resp = await probe.get(
                        rs.host, rs.port, k.target, 10.0, k.method, k.headers, k.body
                    )
                except (OSError, TimeoutError, ValueError) as exc:
                    marks.append("✗")
                    problems.append(terminal(f"{k.label}: {exc or type(exc).__name__}"))
                    continue
                ok = resp.status in want
                marks.append(f"{'✓' if ok else '✗'} {resp.status}")
                if not ok:
                    # the server's own bytes: printable (an ESC in a body reached the terminal)
                    tail = terminal(" ".join(resp.body[-120:].decode("utf-8", "replace").split()))
                    problems.append(
                        f"{k.label}: answered {resp.status}, expected {k.expect or '2xx'}: {tail}"
                    )
            await launcher.stop(rs)
            bad += bool(problems)
            if problems:
                details.append((stack.name, [*problems, f"log: {rs.log_path}"]))
            table.add_row(
                escape(stack.name),
                *marks,
                f"{ready:.2f}s",
                f"{len(problems)} problem{'s' * (len(problems) != 1)}" if problems else "ok",
                style="red" if problems else None,
            )
    Console().print(table)
    for name, lines in details:
        print(f"\n✗ {printable.terminal(name)}")
        for line in lines:  # a launch failure's log tail, a server's answer: never raw
            print(f"    {printable.terminal(line)}")
    # an uninstalled server is neither verified nor failed: never count it as verified
    print(
        f"{len(chosen) - bad - skipped} of {len(chosen)} stacks verified"
        + (f", {skipped} not installed (name them to require them)" if skipped else ""),
        file=sys.stderr,
    )
    if chosen and skipped == len(chosen):  # nothing verified is not a pass
        python = chosen[0].spec.python
        kind = "asgi" if any(s.base.partition("[")[0] in COMMON["asgi"] for s in chosen) else "wsgi"
        print(
            f"stackrace verify: no server that runs your app is installed where it runs: "
            f"`stackrace install --into {python} {' '.join(COMMON[kind])}` installs the "
            "common ones there",
            file=sys.stderr,
        )
        return 1
    return 1 if bad else 0
