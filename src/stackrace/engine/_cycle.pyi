"""Types of the C extension engine/_cycle.c (the engine's transport: plain TCP and TLS)."""

from typing import Any

CONNECTING: int
OPEN: int
HANDSHAKE: int
CLOSED: int
H2_RESET: int
H2_UNPROCESSED: int
H2_LOCAL: int
H2_FAULT: int

class H2Request:
    def __init__(
        self,
        method: str,
        scheme: str,
        authority: str,
        path: str,
        headers: list[tuple[str, str]],
        body: bytes | None = None,
    ) -> None: ...

class TlsContext:
    has_session: bool
    def __init__(
        self,
        verify: bool,
        cafile: str | None,
        host: str | None,
        resume: bool,
        min_version: int,
        alpn: bytes,
        max_version: int = 0,
    ) -> None: ...

class KeptLoop:
    requests: int
    sent: int
    def __init__(self, counts: list[int], request: bytes) -> None: ...
    def take(self) -> tuple[int, int, int, int]: ...

class Transport:
    fd: int
    state: int
    reading: int
    connect_ns: int
    frame: int
    protocol: Any
    tls: TlsContext | None
    max_streams: int
    def __init__(
        self,
        poller: Any,
        protocol: Any,
        opener: Any,
        family: int,
        addr: tuple[Any, ...],
        now: int,
        first: bytes | None = None,
        nodelay: bool = False,
        rcvbuf: int = 0,
        frame: bool = False,
        tls: TlsContext | None = None,
        h2: bool = False,
        kept: KeptLoop | None = None,
    ) -> None: ...
    def submit(self, slot: Any, request: H2Request, keep: bool = False) -> int: ...
    def cancel_stream(self, slot: Any) -> None: ...
    def stalled(self, slot: Any) -> bool: ...
    def on_event(self, events: int) -> None: ...
    def _more(self, connection: int, events: int) -> None: ...
    def write(self, data: bytes) -> None: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...
    def release(self) -> None: ...
    def cancel(self) -> None: ...
    def recycle(self, protocol: Any, now: int, first: bytes) -> int: ...
    def detach(self, family: int) -> Any: ...
    def get_write_buffer_size(self) -> int: ...
    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def is_closing(self) -> bool: ...
    def unacked(self) -> int: ...
    def get_extra_info(self, name: str, default: Any = None) -> Any: ...

class Dispatcher:
    epfd: int
    dispatching: int
    def __init__(self, epfd: int, handlers: dict[int, Any], stale: set[int]) -> None: ...
    def __call__(self) -> int: ...

def slot(ns: int) -> int: ...
def tally(counts: list[int], ns: int) -> None: ...
def frame(response: bytes) -> int: ...
def tls_alive() -> int: ...
