"""The database the apps query: a private MariaDB we manage, or an existing server.

No Textual here (import-linter contract): bench, the launcher, the TUI and tests use it.

    db = open_database()                       # the private instance (service lifetime)
    settings = db.ensure_ready(rows=1_000_000)  # start if needed, seed if needed
    env = db_env(settings, rows=1_000_000)      # merge into every stack's environment
"""

from __future__ import annotations

from pathlib import Path

from stackrace.db.counters import (
    QueryCounters,
    check_query_count,
    plausible_sum_range,
    read_counters,
    sum_is_plausible,
    work_between,
)
from stackrace.db.errors import DbError, SeedInterrupted
from stackrace.db.external import ExternalDatabase
from stackrace.db.instance import DB_NAME, DB_USER
from stackrace.db.managed import DEFAULT_MAX_CONNECTIONS, DEFAULT_PORT, ManagedMariaDB
from stackrace.db.paths import ENV_BINDIR, ENV_DIR, default_dir
from stackrace.db.seed import DEFAULT_ROWS, ENGINES, SeedResult, SeedState
from stackrace.db.settings import (
    ENV_DSN,
    ENV_HOST,
    ENV_NAME,
    ENV_PASSWORD,
    ENV_PORT,
    ENV_ROWS,
    ENV_SOCKET,
    ENV_USER,
    DbSettings,
    db_env,
    parse_dsn,
    settings_from_env,
)
from stackrace.db.status import DbStatus

Database = ManagedMariaDB | ExternalDatabase


def open_database(
    dsn: str | None = None,
    *,
    allow_remote: bool = False,
    root: Path | str | None = None,
    port: int | None = None,
    scoped: bool = False,
) -> Database:
    """An existing server when `dsn` is given, else the private MariaDB."""
    if dsn:
        return ExternalDatabase(dsn, allow_remote)
    return ManagedMariaDB(root, port, scoped=scoped)


__all__ = [
    "DB_NAME",
    "DB_USER",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_PORT",
    "DEFAULT_ROWS",
    "ENGINES",
    "ENV_BINDIR",
    "ENV_DIR",
    "ENV_DSN",
    "ENV_HOST",
    "ENV_NAME",
    "ENV_PASSWORD",
    "ENV_PORT",
    "ENV_ROWS",
    "ENV_SOCKET",
    "ENV_USER",
    "Database",
    "DbError",
    "DbSettings",
    "DbStatus",
    "ExternalDatabase",
    "ManagedMariaDB",
    "QueryCounters",
    "SeedInterrupted",
    "SeedResult",
    "SeedState",
    "check_query_count",
    "db_env",
    "default_dir",
    "open_database",
    "parse_dsn",
    "plausible_sum_range",
    "read_counters",
    "settings_from_env",
    "sum_is_plausible",
    "work_between",
]
