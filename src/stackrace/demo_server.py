"""A tiny aiohttp server for the headless demo: `python -m stackrace.demo_server PORT`."""

from __future__ import annotations

import sys

from aiohttp import web


async def hello(_: web.Request) -> web.Response:
    return web.Response(text="Hello, World!")


def main() -> None:
    app = web.Application()
    app.router.add_get("/hello", hello)
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)


if __name__ == "__main__":
    main()
