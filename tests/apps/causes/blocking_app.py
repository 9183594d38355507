"""Blocking I/O in a sync worker: each request waits 10 ms on its backend (a sleep
stands in for the call). Known answer: blocking wait, in wait_for_backend."""

import time


def wait_for_backend() -> bytes:
    time.sleep(0.010)
    return b"backend answered\n"


def app(environ, start_response):
    body = wait_for_backend()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
