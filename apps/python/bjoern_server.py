"""bjoern serving wsgi_app: `python bjoern_server.py --host H --port P`.

One process, one thread, no worker setting: the blocking time.sleep in /io stalls the
whole server, which is what this stack is here to show.
"""

from __future__ import annotations

import argparse

import bjoern
from wsgi_app import app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args()
    bjoern.run(app, args.host, args.port)


if __name__ == "__main__":
    main()
