"""The one WSGI app every WSGI server serves (gunicorn in every worker class, uWSGI,
granian, waitress, bjoern, gevent.pywsgi, meinheld, PyPy).

/io waits with time.sleep: a blocking wait in sync and threaded servers; gevent makes it
cooperative where it monkey-patches `time` (gunicorn's gevent worker, gevent_server.py).
/db and /dbjson run PyMySQL (db_sync.py: a connection per thread, or a pool under gevent).
Kept Python 3.9-compatible for the PyPy stack.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from contract import HELLO, JSON, NOT_FOUND, OK, TEXT, db_queries, io_ms, json_body
from db_sync import db_response, row_response

StartResponse = Callable[..., object]
_STATUS = {200: "200 OK", 503: "503 Service Unavailable"}


def _reply(start_response: StartResponse, status: str, ctype: str, body: bytes) -> list[bytes]:
    start_response(status, [("Content-Type", ctype), ("Content-Length", str(len(body)))])
    return [body]


def app(environ: dict, start_response: StartResponse) -> Iterable[bytes]:
    path = environ.get("PATH_INFO", "")
    if path == "/hello":
        return _reply(start_response, "200 OK", TEXT, HELLO)
    if path == "/json":
        return _reply(start_response, "200 OK", JSON, json_body())
    if path == "/io":
        time.sleep(io_ms(environ.get("QUERY_STRING")) / 1000)
        return _reply(start_response, "200 OK", TEXT, OK)
    if path == "/db":
        status, body = db_response(db_queries(environ.get("QUERY_STRING")))
        return _reply(start_response, _STATUS[status], TEXT, body)
    if path == "/dbjson":
        status, body = row_response()
        return _reply(start_response, _STATUS[status], JSON if status == 200 else TEXT, body)
    return _reply(start_response, "404 Not Found", TEXT, NOT_FOUND)


application = app  # the name uWSGI and mod_wsgi look for by default
