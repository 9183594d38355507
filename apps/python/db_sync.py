"""/db for the WSGI apps, with PyMySQL.

How connections are held follows the server's concurrency model:
- threads and processes (gunicorn sync and gthread, uWSGI, waitress, granian's WSGI
  threads, bjoern, meinheld, PyPy): one persistent connection per thread, opened on the
  first /db request of that thread. A process with one thread has one connection.
- greenlets under gevent's monkey patching (gunicorn's gevent worker, gevent.pywsgi):
  a thread-local would be greenlet-local there (a connection per client connection), so a
  bounded pool of POOL_SIZE connections per process, shared by all greenlets; PyMySQL's
  socket I/O is gevent's cooperative I/O, so a greenlet waiting on MariaDB lets others run.

A connection that fails is dropped: that request gets a 503 and the next one connects
again, so a restarted database is picked up without restarting the stack.
Kept Python 3.9-compatible for the PyPy stack.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from contract import DB_QUERY, DB_ROW_QUERY, DB_UNAVAILABLE, db_body, row_body
from dbenv import POOL_SIZE, connect_args, log_error, random_id, random_start

T = TypeVar("T")


def _connect() -> Any:
    import pymysql  # here, not at import: stacks serve /hello without the driver too

    # ssl_disabled: PyMySQL would otherwise spend 30-50 ms per connect building an SSL
    # context, even against a server without TLS
    return pymysql.connect(**connect_args(), ssl_disabled=True, read_timeout=30)


def _close(conn: Any) -> None:
    try:
        conn.close()
    except Exception:  # already closed by the failure: nothing left to release
        pass


def _queries(conn: Any, n: int) -> float:
    total = 0.0
    with conn.cursor() as cur:
        for _ in range(n):
            cur.execute(DB_QUERY, (random_start(),))
            for row in cur.fetchall():
                total += row[0]
    return total


def _row(conn: Any) -> bytes:
    with conn.cursor() as cur:
        cur.execute(DB_ROW_QUERY, (random_id(),))
        row_id, value = cur.fetchone()
    return row_body(row_id, value)


class _PerThread:
    def __init__(self) -> None:
        self._local = threading.local()

    def run(self, work: Callable[[Any], T]) -> T:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = _connect()
            self._local.conn = conn
        try:
            return work(conn)
        except BaseException:
            self._local.conn = None
            _close(conn)
            raise


class _Pool:
    def __init__(self, size: int) -> None:
        # LIFO slots, None until a connection is first needed: a warm connection is reused
        # first, and only as many are opened as requests ever ran at once (≤ size)
        self._slots: queue.LifoQueue[Any] = queue.LifoQueue()
        for _ in range(size):
            self._slots.put(None)

    def run(self, work: Callable[[Any], T]) -> T:
        conn = self._slots.get()  # cooperative under gevent: waits for a free connection
        try:
            if conn is None:
                conn = _connect()
            result = work(conn)
        except BaseException:
            if conn is not None:
                _close(conn)
            self._slots.put(None)
            raise
        self._slots.put(conn)
        return result


def _gevent_patched() -> bool:
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and bool(monkey.is_module_patched("socket"))


_holder: _PerThread | _Pool | None = None
_holder_lock = threading.Lock()


def _get_holder() -> _PerThread | _Pool:
    # chosen at the first /db request: by then gunicorn's gevent worker has patched
    global _holder
    if _holder is None:
        with _holder_lock:
            if _holder is None:
                _holder = _Pool(POOL_SIZE) if _gevent_patched() else _PerThread()
    return _holder


def db_response(n: int) -> tuple[int, bytes]:
    """(status, body) for /db with n queries: 200 and the sum, or 503 when the database
    cannot be reached (the connection is dropped and the next request reconnects)."""
    try:
        return 200, db_body(_get_holder().run(lambda conn: _queries(conn, n)))
    except Exception as exc:
        log_error(exc)
        return 503, DB_UNAVAILABLE


def row_response() -> tuple[int, bytes]:
    """(status, body) for /dbjson: 200 and one row as JSON, or 503 as /db."""
    try:
        return 200, _get_holder().run(_row)
    except Exception as exc:
        log_error(exc)
        return 503, DB_UNAVAILABLE
