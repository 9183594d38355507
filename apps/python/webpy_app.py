"""web.py under gunicorn's sync worker. /io blocks the worker with time.sleep.

web.py turns its debugger and autoreloader on by default: both are off here.
"""

from __future__ import annotations

import time

import web
from contract import HELLO, JSON, OK, TEXT, io_ms, json_body

web.config.debug = False

urls = (
    "/hello", "Hello",
    "/json", "Json",
    "/io", "Io",
    # /db: the database endpoint comes with its own issue; it will be routed here.
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


app = web.application(urls, globals(), autoreload=False).wsgifunc()
