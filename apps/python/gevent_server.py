"""gevent's own WSGI server (gevent.pywsgi) serving wsgi_app (or another app module):
`python gevent_server.py --host H --port P [--app wsgi|django]`.

monkey.patch_all() runs first, so time.sleep in /io is gevent's cooperative sleep.
`--app django` serves django_app.py, as experiment 004 ran Django under gevent.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402 - after patching, as gevent requires
import importlib  # noqa: E402
import socket  # noqa: E402

from gevent.pywsgi import WSGIHandler, WSGIServer  # noqa: E402


class NoDelayHandler(WSGIHandler):
    """Sets TCP_NODELAY on each accepted socket. Without it a keep-alive response sits
    ~40 ms in the kernel (Nagle against the client's delayed ACK): ~230 req/s, not ~7,500."""

    def __init__(self, sock: socket.socket, address: object, server: WSGIServer) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().__init__(sock, address, server)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--app", default="wsgi", help="serve the module APP_app (wsgi, django)")
    args = parser.parse_args()
    app = importlib.import_module(f"{args.app}_app").app
    server = WSGIServer(
        (args.host, args.port), app, handler_class=NoDelayHandler, log=None, error_log="default"
    )
    server.serve_forever()


if __name__ == "__main__":
    main()
