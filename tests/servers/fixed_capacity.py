"""A server whose capacity is known exactly: N workers, each holds a request M ms.

    python tests/servers/fixed_capacity.py PORT [--workers N] [--ms M]

Any number of connections are accepted and read (keep-alive, asyncio), but at most N
requests are served at once (a semaphore): each holds its worker M ms, then answers
`ok`. So it answers N/M requests per second at most, and in closed loop with C
connections a request waits ceil(C/N) × M ms: C ≤ N answer in M ms, C = N+1 already
makes one request in N+1 wait 2M. The capacity search is tested against these figures
(tests/integration/test_capacity.py). `GET /` answers at once (readiness).
"""

from __future__ import annotations

import argparse
import asyncio

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"


async def main(port: int, workers: int, ms: float) -> None:
    gate = asyncio.Semaphore(workers)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if head.startswith(b"GET / "):
                    writer.write(HEAD)
                    continue
                async with gate:
                    await asyncio.sleep(ms / 1000)
                    writer.write(HEAD)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", port, backlog=4096)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("port", type=int)
    p.add_argument("--workers", type=int, default=10)
    p.add_argument("--ms", type=float, default=10.0)
    a = p.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main(a.port, a.workers, a.ms))
