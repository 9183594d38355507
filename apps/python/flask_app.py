"""Flask under gunicorn's sync worker. /io blocks the worker with time.sleep."""

from __future__ import annotations

import time

from contract import HELLO, JSON, OK, TEXT, io_ms, json_body
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


# /db: the database endpoint comes with its own issue; it will be routed here.
