"""`stackrace db up|down|status|seed|reset|env`: the private MariaDB, or an existing server."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from stackrace.commands.namespace import typed_options
from stackrace.commands.output_args import add_allow_remote_argument
from stackrace.commands.parser import describe, epilog, examples
from stackrace.db import (
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_PORT,
    DEFAULT_ROWS,
    ENGINES,
    Database,
    DbError,
    DbStatus,
    ManagedMariaDB,
    SeedInterrupted,
    db_env,
    open_database,
)
from stackrace.db.seed import estimate_bytes
from stackrace.settings.parsers import port_number, positive_int
from stackrace.settings.units import fmt_bytes

EXAMPLES = examples(
    ("stackrace db up", "install on first use, then start; it keeps running"),
    ("stackrace db seed", "table test: 1,000,000 random rows (skipped when done)"),
    ("stackrace db status", "state, connection, version, table, limits, counters"),
    ('eval "$(stackrace db env)"', "the STACKRACE_DB_* variables the apps get, in this shell"),
    ("stackrace db down", "stop it"),
)


# `stackrace db ACTION`: the actions, each with its one-line help and its description
_ACTIONS: tuple[tuple[str, str, str], ...] = (
    (
        "up",
        "install if needed and start the server",
        "Install the private MariaDB if needed (about a second, the first time)"
        " and start it; it keeps running until `stackrace db down`.",
    ),
    (
        "down",
        "stop the private server",
        "Stop the private MariaDB (SIGTERM, a clean shutdown); its data stays "
        "for the next `db up`.",
    ),
    (
        "status",
        "state and server settings",
        "The database's state and its connection, version, table, query cache, "
        "limits and counters.",
    ),
    (
        "seed",
        "fill table test with random values (skipped if done)",
        "Fill table test with random values for the /db workload (skipped when "
        "done, unless --force).",
    ),
    (
        "reset",
        "drop the seeded tables",
        "Drop the seeded tables (test, seed_meta), or with --wipe stop the "
        "server and delete its whole directory.",
    ),
    (
        "env",
        "print the STACKRACE_DB_* variables the apps get",
        "Print the STACKRACE_DB_* variables the apps get, as shell exports "
        "(`eval` them to use the database by hand).",
    ),
)


def register(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "The private MariaDB the /db workload queries: start, seed, check, reset and stop "
        "it, or point stackrace at a server of your own (--db DSN).",
        EXAMPLES,
        "docs/db.md",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--dir",
        default=None,
        help="the private instance's directory (default $STACKRACE_DB_DIR, else "
        "~/.cache/stackrace/mariadb)",
    )
    common.add_argument(
        "--db",
        default=None,
        metavar="DSN",
        help="use an existing server instead: mysql://user:password@host:port/database "
        "(default: the private one)",
    )
    add_allow_remote_argument(
        common, "allow a --db host that is not loopback (default: loopback only)"
    )
    sub = p.add_subparsers(dest="db_action", metavar="ACTION", required=True)
    more = epilog(EXAMPLES, "docs/db.md")
    # one parser per action, from one table (name, help, description): each differs only
    # in its words and its own options
    parsers = {
        name: sub.add_parser(
            name, parents=[common], epilog=more, help=short, description=description
        )
        for name, short, description in _ACTIONS
    }
    up = parsers["up"]
    up.add_argument(
        "--port",
        type=port_number,
        default=None,
        help=f"loopback TCP port (default {DEFAULT_PORT}, then whatever the instance last used)",
    )
    up.add_argument(
        "--max-connections",
        type=positive_int,
        default=DEFAULT_MAX_CONNECTIONS,
        help=f"server max_connections (default {DEFAULT_MAX_CONNECTIONS})",
    )
    up.add_argument(
        "--mariadbd-arg",
        action="append",
        default=[],
        metavar="OPTION",
        help="extra mariadbd option, repeatable "
        "(e.g. --mariadbd-arg=--thread-handling=pool-of-threads)",
    )

    status = parsers["status"]
    status.add_argument("--json", action="store_true", help="print the status as JSON")

    seed = parsers["seed"]
    seed.add_argument(
        "--rows", type=int, default=DEFAULT_ROWS, help=f"rows (default {DEFAULT_ROWS:,})"
    )
    seed.add_argument(
        "--engine", default="myisam", choices=ENGINES, help="storage engine (default myisam)"
    )
    seed.add_argument("--force", action="store_true", help="seed again even if already done")

    reset = parsers["reset"]
    reset.add_argument(
        "--wipe",
        action="store_true",
        help="stop the private server and delete its whole directory instead",
    )

    p.set_defaults(func=run, read_options=db_options)


@dataclass(frozen=True)
class DbOptions:
    """`stackrace db ACTION`'s command line, typed (an option another action has not
    keeps its default)."""

    action: str
    dir: str | None = None
    db: str | None = None  # an existing server's DSN
    allow_remote: bool = False
    port: int | None = None
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    mariadbd_args: tuple[str, ...] = ()
    json: bool = False
    rows: int = DEFAULT_ROWS
    engine: str = "myisam"
    force: bool = False
    wipe: bool = False


def db_options(args: argparse.Namespace) -> DbOptions:
    # an option of another action is not in `args`: its field keeps the default
    return typed_options(
        DbOptions,
        args,
        action=args.db_action,
        mariadbd_args=tuple(getattr(args, "mariadbd_arg", ())),
    )


def run(o: DbOptions) -> int:
    return ACTIONS[o.action](o)


def _open(o: DbOptions) -> Database:
    if o.db and o.dir:
        raise DbError("--db and --dir exclude each other (--dir is for the private instance)")
    db = open_database(o.db, allow_remote=o.allow_remote, root=o.dir, port=o.port)
    if isinstance(db, ManagedMariaDB):
        db.max_connections = o.max_connections
        db.extra_args = list(o.mariadbd_args)
    return db


def _guard(
    action: Callable[[DbOptions, Database], int],
) -> Callable[[DbOptions], int]:
    """One line on stderr and exit status 1 for a DbError (2 for a usage error)."""

    def wrapper(o: DbOptions) -> int:
        try:
            return action(o, _open(o))
        except SeedInterrupted as exc:  # Ctrl-C: stopped on the server too, said in one line
            print(f"stackrace db {o.action}: {exc}", file=sys.stderr)
            return 130
        except DbError as exc:
            print(f"stackrace db {o.action}: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print(f"stackrace db {o.action}: interrupted", file=sys.stderr)
            return 130

    return wrapper


_SAY_ESTIMATE_FROM = 10_000_000  # rows: a seed that takes long enough to be told first


@_guard
def _up(o: DbOptions, db: Database) -> int:
    if not isinstance(db, ManagedMariaDB):
        db.up()
        print(f"using the existing server at {db.settings.redacted()} (nothing to start)")
        return 0
    t0 = time.monotonic()
    settings = db.up()
    if db.started:
        verb = f"started in {time.monotonic() - t0:.1f} s"
    elif db.waited:  # another `db up` (or a bench) held the start: it started it
        verb = "already starting/running (another stackrace started it)"
    else:
        verb = "already running"
    print(f"private MariaDB {verb}: {settings.redacted()} (socket {settings.socket})")
    for note in db.notes:
        print(f"note: {note}")
    print("stop it with `stackrace db down`; seed it with `stackrace db seed`")
    return 0


@_guard
def _down(o: DbOptions, db: Database) -> int:
    if not isinstance(db, ManagedMariaDB):
        raise DbError("--db points at an existing server: stackrace never stops it")
    print("stopped" if db.down() else "not running")
    return 0


@_guard
def _status(o: DbOptions, db: Database) -> int:
    st = db.status()
    if o.json:
        sys.stdout.write(msgspec.json.encode(st).decode() + "\n")
    else:
        for label, value in status_lines(st):
            print(f"{label:<24} {value}")
    return 0 if st.state in ("running", "stopped", "not installed") else 1


@_guard
def _seed(o: DbOptions, db: Database) -> int:
    if o.rows >= _SAY_ESTIMATE_FROM:
        need = estimate_bytes(o.rows, o.engine)
        print(
            f"seeding {o.rows:,} rows ({o.engine}): about {need / 1e9:,.1f} GB on the "
            "server's disk; Ctrl-C stops it (on the server too)",
            flush=True,
        )
    result = db.seed(o.rows, o.engine, force=o.force)
    if result.skipped:
        print(f"already seeded: {result.rows:,} rows, {result.engine} (use --force to redo)")
    else:
        again = " (an interrupted seed was redone)" if result.redone else ""
        print(
            f"seeded {result.rows:,} rows into test ({result.engine}) in "
            f"{result.seconds:.2f} s{again}"
        )
    return 0


@_guard
def _reset(o: DbOptions, db: Database) -> int:
    db.reset(wipe=o.wipe)
    if o.wipe:
        assert isinstance(db, ManagedMariaDB)
        print(f"stopped and deleted {db.paths.root}")
    else:
        print("dropped tables test and seed_meta")
    return 0


@_guard
def _env(o: DbOptions, db: Database) -> int:
    rows = None
    if db.is_running():
        state = db.seed_state()
        rows = state.rows if state and state.done else None
    for key, value in db_env(db.settings, rows).items():
        print(f"export {key}={shlex.quote(value)}")
    return 0


# each action's function, by its name on the command line
ACTIONS: dict[str, Callable[[DbOptions], int]] = {
    "up": _up, "down": _down, "status": _status, "seed": _seed, "reset": _reset, "env": _env,
}  # fmt: skip


def status_lines(st: DbStatus) -> list[tuple[str, str]]:
    """The human view of a status, as (label, value) rows."""
    head = "private MariaDB" if st.kind == "managed" else "existing server"
    state = st.state + (f" (pid {st.pid})" if st.pid else "")
    lines = [(head, state)]
    if st.dir:
        lines.append(("directory", st.dir))
    if st.settings:
        lines.append(("connect", st.settings.redacted()))
        if st.settings.socket:
            lines.append(("socket", st.settings.socket))
    if st.run_as:
        lines.append(("runs as", st.run_as))
    if st.secure_file_priv:
        lines.append(("file access", f"only in {st.secure_file_priv} (secure_file_priv)"))
    if st.error:
        lines.append(("error", st.error))
    lines += [("note", note) for note in st.notes]
    if st.state == "not installed":
        lines.append(("next", "stackrace db up"))
    f = st.facts
    if f is None:
        return lines
    v = f.variables
    if f.test_engine is None:
        table = "missing (run `stackrace db seed`)"
    else:
        table = f"{f.test_rows:,} rows, {f.test_engine}"
    if st.seed is not None:
        done = "complete" if st.seed.done else "INTERRUPTED (seed again)"
        took = f", {st.seed.seconds:.2f} s" if st.seed.seconds else ""
        table += f"; seed {done}: {st.seed.rows:,} rows {st.seed.engine}{took}"
    lines += [
        ("version", v.get("version", "?")),
        ("port", v.get("port", "?")),
        ("table test", table),
        ("default engine", v.get("default_storage_engine", "?")),
        ("query cache", f"{v.get('query_cache_type', '?')} (size {v.get('query_cache_size')})"),
        (
            "max_connections",
            f"{v.get('max_connections', '?')} "
            f"(open_files_limit {v.get('open_files_limit', '?')}, "
            f"{v.get('thread_handling', '?')}, {f.threads_connected} connected now)",
        ),
        ("innodb_buffer_pool_size", _bytes(v.get("innodb_buffer_pool_size"))),
        ("key_buffer_size", _bytes(v.get("key_buffer_size"))),
        (
            "queries since start",
            f"Questions {f.questions:,}, Com_select {f.com_select:,} (uptime {f.uptime_s} s)",
        ),
    ]
    return lines


def _bytes(value: str | None) -> str:
    if value is None or not value.isdigit():
        return "?"
    return fmt_bytes(int(value))
