"""A small Flask app to race under every WSGI server (README, "Your app"):

    stackrace --app examples/flask_app:app --path /:3 --path /slow:1

    GET /            a line of text
    GET /slow        waits 20 ms (time.sleep: a blocking call, as a database query is)
    GET /items/N     a small JSON document
    GET /_counts     how many requests each path got, in this process

It counts its own requests, so what stackrace says it sent can be checked against what
the app saw. With several worker processes `/_counts` is one process's share; with
EXAMPLE_REQUEST_LOG=FILE every process appends one line per request to FILE
("METHOD PATH USER-AGENT", one write with O_APPEND, so lines never mix), the whole
count, which the tests read.
"""

from __future__ import annotations

import os
import threading
import time

from flask import Flask, jsonify, request

app = Flask(__name__)
_counts: dict[str, int] = {}
_lock = threading.Lock()
_log: dict[int, int] = {}  # pid -> descriptor: each worker process opens its own


def _record(path: str) -> None:
    with _lock:
        _counts[path] = _counts.get(path, 0) + 1
    log = os.environ.get("EXAMPLE_REQUEST_LOG")
    if log:
        fd = _log.get(os.getpid())
        if fd is None:
            fd = _log[os.getpid()] = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        agent = request.headers.get("User-Agent", "-").replace(" ", "_")
        os.write(fd, f"{request.method} {path} {agent}\n".encode())


@app.before_request
def count() -> None:
    if request.path != "/_counts":
        _record(request.path)


@app.get("/")
def index() -> str:
    return "Hello from Flask\n"


@app.get("/slow")
def slow() -> str:
    time.sleep(0.02)
    return "slow hello\n"


@app.get("/items/<int:n>")
def item(n: int):  # noqa: ANN201
    return jsonify(id=n, name=f"item {n}")


@app.get("/_counts")
def counts():  # noqa: ANN201
    with _lock:
        return jsonify(dict(_counts))
