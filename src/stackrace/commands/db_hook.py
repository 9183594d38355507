"""The database a command's workload needs, with the command's way of failing: one line.

`open_for_stacks` is serve's and verify's `--db`: the private MariaDB only when asked
for and only when a chosen stack can use it (a newcomer serving /hello needs no MariaDB,
nor mariadb-server installed)."""

from __future__ import annotations

import sys
from collections.abc import Iterable

from stackrace.db import DbError, ManagedMariaDB
from stackrace.db.workload import DEFAULT_ROWS
from stackrace.db.workload import open_for_workload as _open
from stackrace.stacks.definition import DB_WORKLOADS, Stack


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


def open_for_stacks(
    wanted: bool, chosen: Iterable[Stack], private: bool = False
) -> tuple[ManagedMariaDB | None, dict[str, str]] | None:
    """`--db` for these stacks: (the database, the apps' environment) when `wanted` and
    a chosen stack serves /db or /dbjson, (None, {}) when not, None after one error
    line when it could not start."""
    if not (wanted and any(s.serves(w) for s in chosen for w in DB_WORKLOADS)):
        return None, {}
    return open_for_workload(private=private)
