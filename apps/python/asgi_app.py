"""The one plain ASGI app (uvicorn, granian's ASGI interface): no framework in between.

/io waits with `await asyncio.sleep`, the way async code waits for a backend; /db and
/dbjson await aiomysql (db_async.py: a small pool per process).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from contract import HELLO, JSON, NOT_FOUND, OK, TEXT, db_queries, io_ms, json_body
from db_async import db_response, row_response

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def _reply(send: Send, status: int, ctype: str, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", ctype.encode()),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        # answer start-up and shut-down so servers do not log that lifespan is missing
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    path = scope["path"]
    if path == "/hello":
        await _reply(send, 200, TEXT, HELLO)
    elif path == "/json":
        await _reply(send, 200, JSON, json_body())
    elif path == "/io":
        await asyncio.sleep(io_ms(scope["query_string"].decode("latin-1")) / 1000)
        await _reply(send, 200, TEXT, OK)
    elif path == "/db":
        status, body = await db_response(db_queries(scope["query_string"].decode("latin-1")))
        await _reply(send, status, TEXT, body)
    elif path == "/dbjson":
        status, body = await row_response()
        await _reply(send, status, JSON if status == 200 else TEXT, body)
    else:
        await _reply(send, 404, TEXT, NOT_FOUND)
