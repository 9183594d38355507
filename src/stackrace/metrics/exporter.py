"""Serving a race's live figures for Prometheus: `--metrics [HOST:]PORT`.

    exporter = open_exporter(options, "stackrace load")    # binds now: errors before any load
    exporter.follow(lambda: engine)                        # or follow_core(race_core)
    async with exporter.serving():                         # feed + HTTP on the running loop
        ...                                                # the race
    exporter.close()

The socket is bound when the exporter is made, so a port in use or an address that is
not loopback is one error line before anything starts, and it stays bound for the whole
command: `bench` serves it around each of its event loops (the run, then any levels it
measures again), and a scrape that arrives in between waits in the listen backlog.

The feed subscribes to the engine's snapshots (`Engine.snapshots()`: every snapshot,
none missed, so the counters are exact) and falls back to polling `latest` for engines
without a stream (the app's demo). It follows whatever engine the front end hands over,
and a new one when the engine changes (bench's re-measured levels). Figures are turned
into text only when scraped. The HTTP side is the least Prometheus needs: GET /metrics,
one response per connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from stackrace.base.errors import StackraceError
from stackrace.base.netguard import RemoteTargetError, is_loopback
from stackrace.metrics.figures import CONTENT_TYPE, RaceFigures
from stackrace.stacks.sampler import ResourceSample

_POLL = 0.05  # seconds: how often the feed looks for a new engine, or polls `latest`
_READ_TIMEOUT = 5.0  # a client that sends no request head within this is dropped
T = TypeVar("T")


class MetricsError(StackraceError, ValueError):
    """--metrics cannot be served as asked; the message says why."""

    exit_code = 2  # input that cannot be used: refused before anything starts


DEFAULT_HOST = "127.0.0.1"


@dataclass(frozen=True)
class MetricsOptions:
    """`--metrics [HOST:]PORT` (port 0: a free one) and `--metrics-remote`."""

    host: str = DEFAULT_HOST
    port: int = 0
    remote: bool = False  # another address than loopback was allowed on purpose


def open_exporter(o: MetricsOptions | None, prog: str) -> MetricsExporter | None:
    """The exporter the options ask for, bound and announced on stderr; None without
    them. MetricsError when the address is refused or cannot be bound."""
    if o is None:
        return None
    exporter = MetricsExporter(o.host, o.port, remote=o.remote)
    print(f"{prog}: metrics at {exporter.url}", file=sys.stderr, flush=True)
    return exporter


class MetricsExporter:
    def __init__(self, host: str = DEFAULT_HOST, port: int = 0, *, remote: bool = False) -> None:
        """Bound to `host`:`port`, which must be a loopback address unless `remote`
        (--metrics-remote): the figures are this machine's own business otherwise.
        MetricsError when the address is refused or cannot be bound."""
        try:
            local = is_loopback(host)
        except RemoteTargetError as exc:
            raise MetricsError(f"--metrics {host}:{port}: {exc}") from None
        if not local and not remote:
            raise MetricsError(
                f"--metrics {host}:{port}: not a loopback address; the figures are served "
                "to this machine only unless you pass --metrics-remote"
            )
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            self.sock = socket.create_server((host, port), family=family)
        except OSError as exc:
            raise MetricsError(f"--metrics {host}:{port}: {exc.strerror or exc}") from None
        self.figures = RaceFigures()
        self._engine_of: Callable[[], Any] = lambda: None
        self._resources_of: Callable[[], Mapping[str, ResourceSample | None]] | None = None
        # every engine followed, kept referenced so that no later engine gets its id
        self._engines: dict[int, Any] = {}
        self._ended: set[int] = set()  # engines whose snapshot stream has ended
        self._following: Any = None

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.sock.getsockname()[:2]
        return host, port

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"

    # --- what to follow -------------------------------------------------------------

    def follow(
        self,
        engine_of: Callable[[], Any],
        resources_of: Callable[[], Mapping[str, ResourceSample | None]] | None = None,
    ) -> None:
        """Follow the engine `engine_of()` returns (asked again and again: it may change)
        and the resource samples `resources_of()` returns at each scrape."""
        self._engine_of = engine_of
        self._resources_of = resources_of

    def follow_core(self, core: Any) -> None:
        """Follow a race core (stackrace.race.core.core.RaceCore: its engine, and the latest
        resource sample of each member)."""
        self.follow(
            lambda: core.engine,
            lambda: {mid: m.resources for mid, m in core.members.items()},
        )

    # --- serving --------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[MetricsExporter]:
        """Feed and serve on the running loop for the duration of the block."""
        server = await asyncio.start_server(self._handle, sock=self.sock.dup())
        feed = asyncio.create_task(self._feed())
        try:
            yield self
        finally:
            await self._settle()
            feed.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await feed
            server.close()
            await server.wait_closed()

    def close(self) -> None:
        self.sock.close()

    def run_beside(self, main: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run `main()` (the app) in a new event loop, serving meanwhile."""

        async def both() -> T:
            async with self.serving():
                return await main()

        return asyncio.run(both())

    async def _settle(self, timeout: float = 1.0) -> None:
        """Let the feed count what a stopped engine published last."""
        end = asyncio.get_running_loop().time() + timeout
        while self._following is not None and asyncio.get_running_loop().time() < end:
            await asyncio.sleep(0.01)

    async def _feed(self) -> None:
        while True:
            engine = self._engine_of()
            key = id(engine)
            if engine is None or key in self._ended:
                await asyncio.sleep(_POLL)
                continue
            self._engines[key] = engine
            if hasattr(engine, "snapshots"):
                self._following = engine
                try:
                    await self._stream(engine)
                finally:
                    self._following = None
            else:
                snap = getattr(engine, "latest", None)
                if snap is not None:
                    self.figures.ingest(snap, engine, key)
                await asyncio.sleep(_POLL)

    async def _stream(self, engine: Any) -> None:
        """Count every snapshot the engine publishes until it stops, or until the front
        end hands over another engine."""
        stream = engine.snapshots()
        try:
            while True:
                upcoming = asyncio.ensure_future(anext(stream))
                while not upcoming.done():
                    await asyncio.wait({upcoming}, timeout=0.25)
                    if not upcoming.done() and self._engine_of() is not engine:
                        upcoming.cancel()
                        with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                            await upcoming
                        return
                try:
                    snap = upcoming.result()
                except StopAsyncIteration:
                    self._ended.add(id(engine))
                    return
                self.figures.ingest(snap, engine, id(engine))
        finally:
            with contextlib.suppress(RuntimeError):
                await stream.aclose()

    def render(self) -> str:
        if self._resources_of is not None:
            self.figures.set_resources(self._resources_of())
        return self.figures.render()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(_READ_TIMEOUT):
                head = await reader.readuntil(b"\r\n\r\n")
            method, _, rest = head.split(b"\r\n", 1)[0].decode("latin-1").partition(" ")
            path = rest.partition(" ")[0].partition("?")[0]
            if method not in ("GET", "HEAD"):
                status, ctype, body = "405 Method Not Allowed", "text/plain", b"GET only\n"
            elif path in ("/metrics", "/metrics/"):
                status, ctype, body = "200 OK", CONTENT_TYPE, self.render().encode()
            elif path == "/":
                status, ctype, body = "200 OK", "text/plain", b"stackrace: see /metrics\n"
            else:
                status, ctype, body = "404 Not Found", "text/plain", b"see /metrics\n"
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + (body if method != "HEAD" else b"")
            )
            await writer.drain()
        except (
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            TimeoutError,
            ConnectionError,
        ):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
