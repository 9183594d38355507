"""A slow logging handler: every request logs a line, and the handler's emit writes it
to a slow sink (5 ms, as a synchronous network log handler does) while holding the
handler's lock (logging.Handler.handle takes it around emit), so the threads of a
gthread worker queue on logging's lock. Known answer: lock, its holder in
SlowHandler.emit."""

import logging
import time


class SlowHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        time.sleep(0.005)


log = logging.getLogger("orders")
log.addHandler(SlowHandler())
log.setLevel(logging.INFO)
log.propagate = False


def place_order() -> bytes:
    log.info("order placed")
    return b"placed\n"


def app(environ, start_response):
    body = place_order()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
