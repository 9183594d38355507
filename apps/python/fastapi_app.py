"""FastAPI on uvicorn: the same endpoints through FastAPI's routing and responses.

/json returns a dict, so FastAPI's own response path runs (as in a real app); /io
waits with `await asyncio.sleep`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from contract import HELLO, IO_DEFAULT_MS, OK, TEXT, parse_ms, parse_queries
from db_async import db_response
from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response


class ContractJSON(JSONResponse):
    """Starlette's JSONResponse writes compact JSON; the contract's bytes have spaces
    ({"message": "Hello, World!"}), so every stack sends the same 28 bytes."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content).encode()


# given as a header, not media_type, which would append "; charset=utf-8"
PLAIN = {"content-type": TEXT}

app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None, default_response_class=ContractJSON)


@app.get("/hello")
async def hello() -> Response:
    return Response(HELLO, headers=PLAIN)


@app.get("/json")
async def json_() -> dict[str, str]:
    return {"message": "Hello, World!"}


@app.get("/io")
async def io(ms: str = str(IO_DEFAULT_MS)) -> Response:
    await asyncio.sleep(parse_ms(ms) / 1000)
    return Response(OK, headers=PLAIN)


@app.get("/db")
async def db(queries: str | None = None) -> Response:
    # a str, not an int: FastAPI would answer 422 to queries=abc, and the contract says 1
    status, body = await db_response(parse_queries(queries))
    return Response(body, status_code=status, headers=PLAIN)
