"""Long garbage-collection pauses: a large heap of long-lived objects in reference
cycles, and a request handler that makes garbage cycles and collects them (as code that
calls gc.collect() to keep its memory down does): each full collection walks the whole
heap. Known answer: gc, in make_report."""

import gc
import itertools


class Node:
    def __init__(self) -> None:
        self.peer: object = self


# ~300,000 objects in cycles that live as long as the process
HEAP = [[Node() for _ in range(100)] for _ in range(1500)]
for group in HEAP:
    for a, b in itertools.pairwise(group):
        a.peer, b.peer = b, a


def make_report() -> bytes:
    garbage = [Node() for _ in range(200)]
    del garbage
    gc.collect()
    return b"report\n"


def app(environ, start_response):
    body = make_report()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
