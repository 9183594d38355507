"""A lock held across a wait: every request takes one process-wide lock and sleeps 5 ms
holding it, so under gunicorn gthread (1 worker, 8 threads) the threads queue on the lock.
Known answer: lock, in hold_the_lock."""

import threading
import time

LOCK = threading.Lock()


def hold_the_lock() -> bytes:
    with LOCK:
        time.sleep(0.005)
    return b"held\n"


def app(environ, start_response):
    body = hold_the_lock()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
