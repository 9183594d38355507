"""The database a command's workload needs, with the command's way of failing: one line."""

from __future__ import annotations

import sys

from stackrace.db import DbError, ManagedMariaDB
from stackrace.db.workload import DEFAULT_ROWS
from stackrace.db.workload import open_for_workload as _open


def open_for_workload(
    rows: int = DEFAULT_ROWS, private: bool = False
) -> tuple[ManagedMariaDB, dict[str, str]] | None:
    """stackrace.db.workload.open_for_workload, or None after one error line."""
    try:
        db, env = _open(rows, private)
    except DbError as exc:
        print(f"stackrace: database: {exc}", file=sys.stderr)
        return None
    for note in db.notes:  # run as root for want of a mysql user, an old instance remade
        print(f"stackrace: database: {note}", file=sys.stderr)
    return db, env
