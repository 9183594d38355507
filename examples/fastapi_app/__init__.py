"""A small FastAPI app to race under every ASGI server (README, "Your app"):

    stackrace --app examples/fastapi_app:app --path /:3 --path /slow:1

    GET /            a line of text
    GET /slow        waits 20 ms (asyncio.sleep: the event loop serves others meanwhile)
    GET /items/N     a small JSON document
    GET /_counts     how many requests each path got, in this process

Like the Flask example it counts its own requests (EXAMPLE_REQUEST_LOG=FILE: one line
per request from every process, the whole count).
"""

from __future__ import annotations

import asyncio
import os

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse

app = FastAPI()
_counts: dict[str, int] = {}
_log: dict[int, int] = {}  # pid -> descriptor: each worker process opens its own


@app.middleware("http")
async def count(request: Request, call_next):  # noqa: ANN001, ANN201
    path = request.url.path
    if path != "/_counts":
        _counts[path] = _counts.get(path, 0) + 1  # one event loop: no lock needed
        log = os.environ.get("EXAMPLE_REQUEST_LOG")
        if log:
            fd = _log.get(os.getpid())
            if fd is None:
                fd = _log[os.getpid()] = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            agent = request.headers.get("user-agent", "-").replace(" ", "_")
            os.write(fd, f"{request.method} {path} {agent}\n".encode())
    return await call_next(request)


@app.get("/", response_class=PlainTextResponse)
async def index() -> str:
    return "Hello from FastAPI\n"


@app.get("/slow", response_class=PlainTextResponse)
async def slow() -> str:
    await asyncio.sleep(0.02)
    return "slow hello\n"


@app.get("/items/{n}")
async def item(n: int) -> dict:
    return {"id": n, "name": f"item {n}"}


@app.get("/_counts")
async def counts() -> dict:
    return dict(_counts)
