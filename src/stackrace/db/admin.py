"""Admin connections (PyMySQL, synchronous) and the server facts `status` reports."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import msgspec

from stackrace.db.errors import DbError
from stackrace.db.settings import DbSettings

if TYPE_CHECKING:
    import pymysql

# The server variables `stackrace db status` shows.
REPORTED_VARIABLES = (
    "version",
    "port",
    "socket",
    "default_storage_engine",
    "query_cache_type",
    "query_cache_size",
    "max_connections",
    "open_files_limit",
    "innodb_buffer_pool_size",
    "key_buffer_size",
    "thread_handling",
)


def connect(
    settings: DbSettings,
    *,
    user: str | None = None,
    password: str | None = None,
    database: str | None = None,
    via_socket: bool | None = None,
    timeout: float = 5.0,
) -> pymysql.connections.Connection:
    """A PyMySQL connection; over the unix socket when the settings have one.

    ssl_disabled: PyMySQL otherwise spends 30-50 ms per connect building a TLS context.
    autocommit: every admin statement stands alone.
    """
    # the driver is imported at the first connection: every race imports this package
    # (the app's picker, `load`), most never connect, and it keeps start-up fast
    import pymysql  # lazy: only with a database

    use_socket = bool(settings.socket) if via_socket is None else via_socket
    try:
        return pymysql.connect(
            host=settings.host,
            port=settings.port,
            unix_socket=settings.socket if use_socket else None,
            user=settings.user if user is None else user,
            password=settings.password if password is None else password,
            database=settings.database if database is None else (database or None),
            ssl_disabled=True,
            autocommit=True,
            connect_timeout=timeout,
            local_infile=False,
        )
    except pymysql.MySQLError as exc:
        where = settings.socket if use_socket else f"{settings.host}:{settings.port}"
        raise DbError(f"cannot connect to the database at {where}: {_mysql_msg(exc)}") from None


@contextlib.contextmanager
def closing(conn: pymysql.connections.Connection) -> Iterator[pymysql.connections.Connection]:
    """`with closing(connect(...)) as conn`: closed at the end unless closed already (an
    interrupted seed closes its connection itself: db/seed.py)."""
    try:
        yield conn
    finally:
        if conn.open:
            conn.close()


def _mysql_msg(exc: BaseException) -> str:
    args = exc.args
    if len(args) >= 2:
        return f"({args[0]}) {args[1]}"
    return str(exc) or type(exc).__name__


def query(conn: pymysql.connections.Connection, sql: str, args: Any = None) -> list[tuple]:
    """Run one statement and return all rows; MySQL errors become DbError."""
    import pymysql  # lazy: loaded by then (a connection was made): see connect

    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())
    except pymysql.MySQLError as exc:
        raise DbError(f"database error: {_mysql_msg(exc)} (in: {sql.split()[0]} ...)") from None


class ServerFacts(msgspec.Struct, kw_only=True):
    """What the running server says about itself and about table `test`."""

    variables: dict[str, str]
    test_engine: str | None  # None: no table `test`
    test_rows: int | None
    questions: int
    com_select: int
    threads_connected: int
    uptime_s: int


def server_facts(conn: pymysql.connections.Connection, database: str) -> ServerFacts:
    names = ", ".join(f"'{v}'" for v in REPORTED_VARIABLES)
    variables = {
        str(k): str(v)
        for k, v in query(conn, f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})")
    }
    status = {
        str(k).lower(): str(v)
        for k, v in query(
            conn,
            "SHOW GLOBAL STATUS WHERE Variable_name IN "
            "('Questions', 'Com_select', 'Threads_connected', 'Uptime')",
        )
    }
    rows = query(
        conn,
        "SELECT ENGINE FROM information_schema.TABLES "
        "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = 'test'",
        (database,),
    )
    engine = str(rows[0][0]) if rows else None
    count = None
    if engine is not None:
        # COUNT(*) is free on MyISAM and ~0.1-0.3 s for 1M InnoDB rows: fine for a status view
        count = int(query(conn, f"SELECT COUNT(*) FROM {quote_ident(database)}.test")[0][0])
    return ServerFacts(
        variables=variables,
        test_engine=engine,
        test_rows=count,
        questions=int(status.get("questions", 0)),
        com_select=int(status.get("com_select", 0)),
        threads_connected=int(status.get("threads_connected", 0)),
        uptime_s=int(status.get("uptime", 0)),
    )


def quote_ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
