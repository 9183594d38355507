"""The database a db workload needs, opened the one way every front end opens it.

`open_for_workload()` starts (if needed) and seeds (if needed) the private MariaDB and
returns it with the environment every app gets. The instance is scoped to this process:
it stops with it (even on SIGKILL), unless the user already runs one with `stackrace db
up`, which is then used and left running. `private=True` makes a throw-away instance of
its own instead (verify uses it: its query count reads the server's global counters,
which another client would disturb). Keep the returned object until the load is over
and `close()` it. bench, serve, verify and the app all come here.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from stackrace.base.ports import free_port
from stackrace.db import DbError, ManagedMariaDB, db_env

DEFAULT_ROWS = 1_000_000


class _PrivateInstance(ManagedMariaDB):
    """A throw-away instance in a temporary directory, removed on close (with its server
    directory, which may live outside it)."""

    def close(self) -> None:
        super().close()
        try:
            self.reset(wipe=True)
        except DbError:
            shutil.rmtree(self.root, ignore_errors=True)


def _instance(private: bool) -> ManagedMariaDB:
    if private:
        root = Path(tempfile.mkdtemp(prefix="stackrace-db-"))
        return _PrivateInstance(root, free_port(), scoped=True)
    return ManagedMariaDB(scoped=True)


def open_for_workload(
    rows: int = DEFAULT_ROWS, private: bool = False
) -> tuple[ManagedMariaDB, dict[str, str]]:
    """The database, ready, and the apps' environment; DbError says why not."""
    db = _instance(private)
    try:
        settings = db.ensure_ready(rows=rows)
    except DbError:
        db.close()
        raise
    return db, db_env(settings, rows)


async def open_for_workload_async(
    rows: int = DEFAULT_ROWS, private: bool = False
) -> tuple[ManagedMariaDB, dict[str, str]]:
    """The same from an event loop (the app: the screen stays live while it seeds)."""
    db = _instance(private)
    try:
        settings = await db.ensure_ready_async(rows=rows)
    except DbError:
        db.close()
        raise
    return db, db_env(settings, rows)
