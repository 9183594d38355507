"""An existing server the user points at with --db mysql://...: used, never managed.

It has the same surface as ManagedMariaDB where that makes sense; `up` only checks that
the server answers, `down` does nothing, and `reset` drops only the tables a seed made.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Literal

from stackrace.db import admin
from stackrace.db import seed as seeding
from stackrace.db.admin import query
from stackrace.db.errors import DbError
from stackrace.db.settings import DbSettings, parse_dsn
from stackrace.db.status import DbStatus

if TYPE_CHECKING:  # a hint: the driver is imported where a connection is made (admin.py)
    import pymysql


class ExternalDatabase(seeding.SeededDatabase):
    kind: Literal["external"] = "external"

    def __init__(self, dsn: str, allow_remote: bool = False) -> None:
        self.settings: DbSettings = parse_dsn(dsn, allow_remote)

    def connection(self) -> pymysql.connections.Connection:
        return admin.connect(self.settings)

    def up(self) -> DbSettings:
        self.connection().close()
        return self.settings

    async def up_async(self) -> DbSettings:
        return await asyncio.to_thread(self.up)

    def down(self, timeout: float = 0.0) -> bool:
        return False  # not ours to stop

    def close(self) -> None:
        pass

    def is_running(self) -> bool:
        try:
            self.connection().close()
        except DbError:
            return False
        return True

    def status(self) -> DbStatus:
        try:
            with self.connection() as conn:
                facts = admin.server_facts(conn, self.settings.database)
                state = seeding.seed_state(conn)
        except DbError as exc:
            return DbStatus(
                kind="external", state="unreachable", settings=self.settings, error=str(exc)
            )
        return DbStatus(
            kind="external", state="running", settings=self.settings, facts=facts, seed=state
        )

    def _free_space(self, conn: pymysql.connections.Connection) -> tuple[str, int] | None:
        return _local_free_space(conn)

    def reset(self, wipe: bool = False) -> None:
        if wipe:
            raise DbError("--wipe deletes the private instance only; an existing server is kept")
        with self.connection() as conn:
            seeding.drop_seed(conn)

    def ensure_ready(self, rows: int = seeding.DEFAULT_ROWS, engine: str = "myisam") -> DbSettings:
        self.seed(rows, engine)
        return self.settings

    async def ensure_ready_async(
        self, rows: int = seeding.DEFAULT_ROWS, engine: str = "myisam"
    ) -> DbSettings:
        return await asyncio.to_thread(self.ensure_ready, rows, engine)

    def __enter__(self) -> ExternalDatabase:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def _local_free_space(conn: pymysql.connections.Connection) -> tuple[str, int] | None:
    """(data directory, bytes free there) when the server keeps its data on this machine
    and this user may look at it; None otherwise (a remote server's disk is not ours to
    measure: the seed is not refused for it)."""
    try:
        datadir = str(query(conn, "SELECT @@datadir")[0][0])
        if not os.path.isdir(datadir) or not _is_local(conn):
            return None
        st = os.statvfs(datadir)
    except (DbError, OSError, IndexError):
        return None
    return datadir, st.f_bavail * st.f_frsize


def _is_local(conn: pymysql.connections.Connection) -> bool:
    host = getattr(conn, "host", "") or ""
    return bool(getattr(conn, "unix_socket", None)) or host in ("127.0.0.1", "localhost", "::1")
