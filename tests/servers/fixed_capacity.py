"""A server whose capacity is known exactly: N workers, each holds a request M ms.

    python tests/servers/fixed_capacity.py PORT [--workers N] [--ms M]
    … --workers N --threads T --overhead-ms X --cap K     # a tune's known surface
    … --flap FAST_S,SLOW_S --slow-slots S                 # fast and slow seconds
    … --odd-extra-ms X                                    # X ms slower in odd seconds

`--threads T`: N × T requests at once (a worker's threads), at most `--cap`; each worker
past the first adds `--overhead-ms` to every request (their contention), so more
workers are not free: the best configuration is known in advance
(tests/integration/test_tune.py). `--flap`: the server alternates FAST_S seconds at its
full slots and SLOW_S seconds at `--slow-slots`, by the wall clock: a load between the
two both meets and misses a latency target, depending on when it is measured
(tests/integration/test_capacity.py: an unstable boundary). `--odd-extra-ms X`: every
request served in an odd second of the wall clock takes X ms more (fast in even
seconds, slow in odd ones, whatever the load: tests/integration/test_flapping.py).

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
import time

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"


class Gate:
    """At most limit() requests at once, the limit read when a slot is freed or taken."""

    def __init__(self, limit) -> None:
        self.limit = limit
        self.busy = 0
        self.cond = asyncio.Condition()

    async def __aenter__(self) -> None:
        async with self.cond:
            await self.cond.wait_for(lambda: self.busy < self.limit())
            self.busy += 1

    async def __aexit__(self, *exc) -> None:
        async with self.cond:
            self.busy -= 1
            self.cond.notify_all()


async def main(port: int, workers: int, ms: float, threads: int = 1, overhead_ms: float = 0.0,
               cap: int = 0, flap: str = "", slow_slots: int = 0,
               odd_extra_ms: float = 0.0) -> None:  # fmt: skip
    slots = workers * threads
    if cap:
        slots = min(slots, cap)
    hold = (ms + overhead_ms * (workers - 1)) / 1000
    if flap:
        fast_s, slow_s = (float(x) for x in flap.split(","))
        period = fast_s + slow_s

        def limit() -> int:
            return slots if time.monotonic() % period < fast_s else slow_slots

        gate = Gate(limit)
    else:
        gate = Gate(lambda: slots)

    async def poke() -> None:  # a slow phase that ends frees the waiting requests
        while True:
            await asyncio.sleep(0.05)
            async with gate.cond:
                gate.cond.notify_all()

    if flap:
        asyncio.get_running_loop().create_task(poke())

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if head.startswith(b"GET / "):
                    writer.write(HEAD)
                    continue
                async with gate:
                    odd = odd_extra_ms and int(time.time()) % 2
                    await asyncio.sleep(hold + (odd_extra_ms / 1000 if odd else 0.0))
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
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--overhead-ms", type=float, default=0.0)
    p.add_argument("--cap", type=int, default=0)
    p.add_argument("--flap", default="")
    p.add_argument("--slow-slots", type=int, default=1)
    p.add_argument("--odd-extra-ms", type=float, default=0.0)
    a = p.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    args = (a.threads, a.overhead_ms, a.cap, a.flap, a.slow_slots, a.odd_extra_ms)
    asyncio.run(main(a.port, a.workers, a.ms, *args))
