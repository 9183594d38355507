"""Worker restarts: a handler that overruns the server's worker timeout (gunicorn
--timeout 1), so the arbiter kills the worker mid-request (WORKER TIMEOUT) and boots
another. Known answer: worker restarts, in overrun."""

import time


def overrun() -> bytes:
    time.sleep(4.0)
    return b"late\n"


def app(environ, start_response):
    body = overrun()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
