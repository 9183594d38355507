"""Serve a user's WSGI app with a server that has no command line of its own for one:
`python serve_app.py bjoern|gevent --host H --port P module:attr` (stacks.toml's
`bjoern[app]` and `gevent-pywsgi[app]`).

It is run by the app's own interpreter, so it uses the standard library and the server
only. Its own directory is taken off the import path first: the shipped apps beside it
(flask_app.py, …) must never shadow a module of the user's app of the same name.
"""

from __future__ import annotations

import argparse
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if p == "" or os.path.abspath(p) != _HERE]


def _load(target: str):  # noqa: ANN202 - the user's app object
    import importlib

    module, _, attr = target.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("server", choices=["bjoern", "gevent"])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("target", help="module:attr")
    args = parser.parse_args()
    if args.server == "gevent":
        from gevent import monkey

        monkey.patch_all()  # before the app is imported, as gevent requires
        import socket

        from gevent.pywsgi import WSGIHandler, WSGIServer

        class NoDelayHandler(WSGIHandler):
            """TCP_NODELAY on each accepted socket (see gevent_server.py for why)."""

            def __init__(self, sock, address, server):  # noqa: ANN001
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                super().__init__(sock, address, server)

        app = _load(args.target)
        WSGIServer(
            (args.host, args.port), app, handler_class=NoDelayHandler, log=None
        ).serve_forever()
        return
    import bjoern

    bjoern.run(_load(args.target), args.host, args.port)


if __name__ == "__main__":
    main()
