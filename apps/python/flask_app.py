"""Flask under gunicorn's sync worker. /io blocks the worker with time.sleep; /db runs
PyMySQL on one persistent connection per worker (db_sync.py)."""

from __future__ import annotations

import time

from contract import HELLO, JSON, OK, TEXT, db_queries, io_ms, json_body
from db_sync import db_response
from flask import Flask, Response, request

app = Flask(__name__)


@app.get("/hello")
def hello() -> Response:
    # content_type= is taken as is; mimetype= would append "; charset=utf-8"
    return Response(HELLO, content_type=TEXT)


@app.get("/json")
def json_() -> Response:
    return Response(json_body(), content_type=JSON)


@app.get("/io")
def io() -> Response:
    time.sleep(io_ms(request.query_string.decode("latin-1")) / 1000)
    return Response(OK, content_type=TEXT)


@app.get("/db")
def db() -> Response:
    status, body = db_response(db_queries(request.query_string.decode("latin-1")))
    return Response(body, status=status, content_type=TEXT)
