"""Bottle under gunicorn's sync worker. /io blocks the worker with time.sleep; /db runs
PyMySQL on one persistent connection per worker (db_sync.py)."""

from __future__ import annotations

import time

import bottle
from contract import HELLO, JSON, OK, TEXT, db_queries, io_ms, json_body
from db_sync import db_response

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


@app.get("/db")
def db() -> bytes:
    status, body = db_response(db_queries(bottle.request.query_string))
    bottle.response.status = status
    bottle.response.content_type = TEXT
    return body
