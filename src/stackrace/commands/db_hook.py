"""The database a db workload needs: the managed MariaDB, started and seeded on demand."""

from __future__ import annotations

import shutil
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

from stackrace.db import DbError, ManagedMariaDB, db_env


class _PrivateInstance(ManagedMariaDB):
    """A throw-away instance in a temporary directory, removed on close (with its server
    directory, which may live outside it)."""

    def close(self) -> None:
        super().close()
        try:
            self.reset(wipe=True)
        except DbError:
            shutil.rmtree(self.root, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def open_for_workload(
    rows: int = 1_000_000, private: bool = False
) -> tuple[Any, dict[str, str]] | None:
    """Start (if needed) and seed (if needed) the private MariaDB; return it and the app env.

    The instance is scoped to this process: it stops with it (even on SIGKILL), unless
    the user already runs one with `stackrace db up`, which is then used and left running.
    `private=True` makes a throw-away instance of its own instead (verify uses it: its
    query count reads the server's global counters, which another client would disturb).
    Keep the returned object until the load is over and `close()` it.
    """
    if private:
        root = Path(tempfile.mkdtemp(prefix="stackrace-db-"))
        db: ManagedMariaDB = _PrivateInstance(root, _free_port(), scoped=True)
    else:
        db = ManagedMariaDB(scoped=True)
    try:
        settings = db.ensure_ready(rows=rows)
    except DbError as exc:
        print(f"stackrace: database: {exc}", file=sys.stderr)
        db.close()
        return None
    for note in db.notes:  # run as root for want of a mysql user, an old instance remade
        print(f"stackrace: database: {note}", file=sys.stderr)
    return db, db_env(settings, rows)
