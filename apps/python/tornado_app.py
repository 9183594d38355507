"""Tornado's own server: `python tornado_app.py --host H --port P`.

/io waits with `await asyncio.sleep` (Tornado 6 runs on asyncio); /db awaits aiomysql
(db_async.py). Request logging is
off: tornado.access is silenced.
"""

from __future__ import annotations

import argparse
import asyncio
import logging

import tornado.web
from contract import HELLO, JSON, OK, TEXT, db_queries, io_ms, json_body
from db_async import db_response


class Hello(tornado.web.RequestHandler):
    def get(self) -> None:
        self.set_header("Content-Type", TEXT)
        self.write(HELLO)


class Json(tornado.web.RequestHandler):
    def get(self) -> None:
        self.set_header("Content-Type", JSON)
        self.write(json_body())


class Io(tornado.web.RequestHandler):
    async def get(self) -> None:
        await asyncio.sleep(io_ms(self.request.query) / 1000)
        self.set_header("Content-Type", TEXT)
        self.write(OK)


class Db(tornado.web.RequestHandler):
    async def get(self) -> None:
        status, body = await db_response(db_queries(self.request.query))
        self.set_status(status)
        self.set_header("Content-Type", TEXT)
        self.write(body)


def make_app() -> tornado.web.Application:
    return tornado.web.Application(
        [(r"/hello", Hello), (r"/json", Json), (r"/io", Io), (r"/db", Db)]
    )


async def serve(host: str, port: int) -> None:
    make_app().listen(port, address=host)
    await asyncio.Event().wait()  # until SIGTERM ends the process


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args()
    logging.getLogger("tornado.access").disabled = True
    asyncio.run(serve(args.host, args.port))


if __name__ == "__main__":
    main()
