"""Bottle under gunicorn's sync worker. /io blocks the worker with time.sleep."""

from __future__ import annotations

import time

import bottle
from contract import HELLO, JSON, OK, TEXT, io_ms, json_body

app = bottle.Bottle()


@app.get("/hello")
def hello() -> bytes:
    bottle.response.content_type = TEXT
    return HELLO


@app.get("/json")
def json_() -> bytes:
    bottle.response.content_type = JSON
    return json_body()


@app.get("/io")
def io() -> bytes:
    time.sleep(io_ms(bottle.request.query_string) / 1000)
    bottle.response.content_type = TEXT
    return OK


# /db: the database endpoint comes with its own issue; it will be routed here.
