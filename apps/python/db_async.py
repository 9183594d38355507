"""/db for the asyncio apps (uvicorn, FastAPI, granian's ASGI, aiohttp, Tornado), with
aiomysql: a small pool per process (up to POOL_SIZE connections, one kept open), created on
the first /db request inside the server's running loop.

A connection that fails is closed, so the pool drops it; that request gets a 503 and the
pool connects again for the next one, so a restarted database is picked up by itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from contract import DB_QUERY, DB_ROW_QUERY, DB_UNAVAILABLE, db_body, row_body
from dbenv import POOL_SIZE, connect_args, log_error, random_id, random_start

T = TypeVar("T")

_pool: Any = None
_lock: asyncio.Lock | None = None


async def _get_pool() -> Any:
    global _pool, _lock
    if _pool is None:
        if _lock is None:
            _lock = asyncio.Lock()
        async with _lock:  # concurrent first requests make one pool, not many
            if _pool is None:
                import aiomysql  # here, not at import: stacks serve /hello without it

                args = connect_args()
                args["db"] = args.pop("database")
                # aiomysql only speaks TLS when given an ssl context: none here
                _pool = await aiomysql.create_pool(minsize=1, maxsize=POOL_SIZE, **args)
    return _pool


async def _queries(conn: Any, n: int) -> float:
    total = 0.0
    async with conn.cursor() as cur:
        for _ in range(n):
            await cur.execute(DB_QUERY, (random_start(),))
            for row in await cur.fetchall():
                total += row[0]
    return total


async def _row(conn: Any) -> bytes:
    async with conn.cursor() as cur:
        await cur.execute(DB_ROW_QUERY, (random_id(),))
        row_id, value = await cur.fetchone()
    return row_body(row_id, value)


async def _run(work: Callable[[Any], Awaitable[T]]) -> T:
    pool = await _get_pool()
    conn = await pool.acquire()
    try:
        return await work(conn)
    except BaseException:
        conn.close()  # released closed, the pool forgets it instead of handing it out
        raise
    finally:
        pool.release(conn)


async def db_response(n: int) -> tuple[int, bytes]:
    """(status, body) for /db with n queries: 200 and the sum, or 503 when the database
    cannot be reached."""
    try:
        return 200, db_body(await _run(lambda conn: _queries(conn, n)))
    except Exception as exc:
        log_error(exc)
        return 503, DB_UNAVAILABLE


async def row_response() -> tuple[int, bytes]:
    """(status, body) for /dbjson: 200 and one row as JSON, or 503 as /db."""
    try:
        return 200, await _run(_row)
    except Exception as exc:
        log_error(exc)
        return 503, DB_UNAVAILABLE
