"""aiohttp's own server: `python aiohttp_app.py --host H --port P`.

/io waits with `await asyncio.sleep`; /db awaits aiomysql (db_async.py). Access logging
is off (access_log=None).
"""

from __future__ import annotations

import argparse
import asyncio

from aiohttp import web
from contract import HELLO, OK, TEXT, db_queries, io_ms, json_body
from db_async import db_response

# aiohttp's `text=` and `content_type=` append "; charset=utf-8"; a raw header does not
PLAIN = {"Content-Type": TEXT}
JSON_HEADERS = {"Content-Type": "application/json"}


async def hello(request: web.Request) -> web.Response:
    return web.Response(body=HELLO, headers=PLAIN)


async def json_(request: web.Request) -> web.Response:
    return web.Response(body=json_body(), headers=JSON_HEADERS)


async def io(request: web.Request) -> web.Response:
    await asyncio.sleep(io_ms(request.query_string) / 1000)
    return web.Response(body=OK, headers=PLAIN)


async def db(request: web.Request) -> web.Response:
    status, body = await db_response(db_queries(request.query_string))
    return web.Response(status=status, body=body, headers=PLAIN)


def make_app() -> web.Application:
    app = web.Application()
    app.router.add_get("/hello", hello)
    app.router.add_get("/json", json_)
    app.router.add_get("/io", io)
    app.router.add_get("/db", db)
    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args()
    try:
        import uvloop  # the same loop uvicorn uses, so the comparison is about the server

        uvloop.install()
    except ImportError:
        pass
    web.run_app(make_app(), host=args.host, port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
