"""An httpbin-like WSGI app for the busy-core tests (tests/integration/test_busy_core.py).

/get answers a small JSON echo of the request after a fixed piece of CPU work (about
2 ms on this machine's CPython: a fixed amount, not a time, so a server held back by a
busy core takes longer to do it, as httpbin's pages do); /delay?ms=N sleeps N ms first
(default 20), as httpbin's /delay/N. Any other path is /get.
"""

from __future__ import annotations

import json
import time
from urllib.parse import parse_qs

WORK = 40_000  # squares summed per request: ~2 ms of CPython


def app(environ, start_response):
    path = environ.get("PATH_INFO", "/")
    query = parse_qs(environ.get("QUERY_STRING", ""))
    if path == "/delay":
        try:
            ms = min(10_000.0, max(0.0, float(query.get("ms", ["20"])[0])))
        except ValueError:
            ms = 20.0
        time.sleep(ms / 1000)
    total = sum(i * i for i in range(WORK))
    body = json.dumps(
        {"url": path, "args": {k: v[0] for k, v in query.items()}, "work": total % 997}
    ).encode()
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]
