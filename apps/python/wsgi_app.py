"""The one WSGI app every WSGI server serves (gunicorn in every worker class, uWSGI,
granian, waitress, bjoern, gevent.pywsgi, meinheld, PyPy).

/io waits with time.sleep: a blocking wait in sync and threaded servers; gevent makes it
cooperative where it monkey-patches `time` (gunicorn's gevent worker, gevent_server.py).
Kept Python 3.9-compatible for the PyPy stack.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from contract import HELLO, JSON, NOT_FOUND, OK, TEXT, io_ms, json_body

StartResponse = Callable[..., object]


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
    # /db: the database endpoint comes with its own issue; it will be routed here.
    return _reply(start_response, "404 Not Found", TEXT, NOT_FOUND)


application = app  # the name uWSGI and mod_wsgi look for by default
