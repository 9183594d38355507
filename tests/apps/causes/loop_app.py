"""An event loop blocked by a synchronous call inside async code: an ASGI handler that
calls time.sleep (not asyncio.sleep), so under uvicorn every request waits for the one
in the loop. Known answer: event loop blocked, in fetch_prices."""

import time


async def fetch_prices() -> bytes:
    time.sleep(0.010)  # the bug: a blocking call in async def
    return b"prices\n"


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = await fetch_prices()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(body))],
        }
    )
    await send({"type": "http.response.body", "body": body})
