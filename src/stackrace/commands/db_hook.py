"""The database a db workload needs: the managed MariaDB, started and seeded on demand."""

from __future__ import annotations

import sys
from typing import Any

from stackrace.db import DbError, ManagedMariaDB, db_env


def open_for_workload(rows: int = 1_000_000) -> tuple[Any, dict[str, str]] | None:
    """Start (if needed) and seed (if needed) the private MariaDB; return it and the app env.

    The instance is scoped to this process: it stops with it (even on SIGKILL), unless
    the user already runs one with `stackrace db up`, which is then used and left running.
    Keep the returned object until the load is over and `close()` it.
    """
    db = ManagedMariaDB(scoped=True)
    try:
        settings = db.ensure_ready(rows=rows)
    except DbError as exc:
        print(f"stackrace: database: {exc}", file=sys.stderr)
        db.close()
        return None
    return db, db_env(settings, rows)
