"""web.py under gunicorn's sync worker. /io blocks the worker with time.sleep.

web.py turns its debugger and autoreloader on by default: both are off here.
"""

from __future__ import annotations

import time

import web
from contract import HELLO, JSON, OK, TEXT, db_queries, io_ms, json_body
from db_sync import db_response

web.config.debug = False

urls = (
    "/hello", "Hello",
    "/json", "Json",
    "/io", "Io",
    "/db", "Db",
)  # fmt: skip


class Hello:
    def GET(self) -> bytes:
        web.header("Content-Type", TEXT)
        return HELLO


class Json:
    def GET(self) -> bytes:
        web.header("Content-Type", JSON)
        return json_body()


class Io:
    def GET(self) -> bytes:
        time.sleep(io_ms(web.ctx.query.lstrip("?")) / 1000)
        web.header("Content-Type", TEXT)
        return OK


class Db:
    def GET(self) -> bytes:
        status, body = db_response(db_queries(web.ctx.query.lstrip("?")))
        if status != 200:
            web.ctx.status = "503 Service Unavailable"
        web.header("Content-Type", TEXT)
        return body


app = web.application(urls, globals(), autoreload=False).wsgifunc()
