"""Slow clients: a profile of how a client sends and reads, and the engine's side of it.

Every other client of the engine sends its request in one write and reads at memory
speed. Real clients on a mobile network or a long WAN link do neither, and a slow client
is the classic way a synchronous worker is held: the worker reads the request itself, so
it waits while the request trickles in (gunicorn's docs ask for a buffering proxy in
front of sync workers for this reason). A profile says how slow:

    upload=20ms     each request goes out in pieces spread over this time (the worker that
                    reads it waits that long for its last byte)
    pieces=3        into how many pieces (default 3: the request line, the headers, the
                    end), evenly spaced over `upload`
    read=64KB/s     responses are read at most this fast (KB = 1,000 bytes; KiB, MB, MiB
                    too), through a small receive buffer (`rcvbuf`, default 4 KiB), so a
                    large response holds the server's writer as it would over the link
    rcvbuf=4KiB     the socket's receive buffer when `read` is capped

Named profiles (`--clients mobile`, or `mobile:read=1MB/s` to change one figure), or one
of your own (`--clients mine:upload=20ms,read=64KB/s`: a new name starts from nothing):

    slow     upload=20ms                     a request that takes 20 ms to arrive
    mobile   upload=200ms,read=180KB/s       DevTools' "Fast 3G" (1.44 Mbit/s down)
    wan      upload=40ms,read=1MB/s          a distant client on a decent link

`slow_share` (0–1) of the connections are slow (spread evenly: with 20 %, every fifth
connection); a slow connection slot stays slow when it reconnects.

The engine's side is `SlowClient`: it sits between a Connection and its transport,
passing the request on in pieces (loop timers) and pausing the transport's reads to keep
to the rate. The Connection sees an ordinary transport, so the accounting is unchanged:
a slow request's latency includes its upload and its slow read, as the client lives it.
"""

from __future__ import annotations

import re
from collections import deque
from typing import TYPE_CHECKING, Any

import msgspec

from stackrace.base.errors import StackraceError

if TYPE_CHECKING:  # for the hints alone: `stackrace --help` reads this module's profiles
    import asyncio


class ClientProfile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How a slow client sends and reads (see the module docstring)."""

    name: str = "slow"
    upload: float = 0.0  # seconds to send one request, first byte to last
    pieces: int = 3
    read: float | None = None  # bytes per second, None: as fast as it comes
    rcvbuf: int = 4096

    def describe(self) -> str:
        """The profile as `--clients` text that reads back to the same profile (the race
        settings keep this text): every figure that differs from the default."""
        parts = []
        if self.upload:
            parts.append(f"upload={_ms(self.upload)}")
        if self.pieces != _DEFAULT.pieces:
            parts.append(f"pieces={self.pieces}")
        if self.read:
            parts.append(f"read={_rate(self.read)}")
        if self.rcvbuf != _DEFAULT.rcvbuf:
            parts.append(f"rcvbuf={self.rcvbuf}B")
        return f"{self.name}:" + ",".join(parts) if parts else self.name


_DEFAULT = ClientProfile()


NAMED: dict[str, ClientProfile] = {
    "slow": ClientProfile("slow", upload=0.020),
    "mobile": ClientProfile("mobile", upload=0.200, read=180_000),
    "wan": ClientProfile("wan", upload=0.040, read=1_000_000),
}

_UNITS = {"": 1, "b": 1, "kb": 1000, "kib": 1024, "mb": 1_000_000, "mib": 1 << 20}
_MAX_UPLOAD = 60.0
_MAX_PIECES = 64


class ProfileError(StackraceError, ValueError):
    """A --clients value that is not a profile; the message says what is expected."""


def _ms(s: float) -> str:
    return f"{s * 1000:g}ms"


def _rate(bps: float) -> str:
    for unit, size in (("MB", 1_000_000), ("KB", 1000)):
        if bps >= size and bps % size == 0:
            return f"{bps / size:g}{unit}/s"
    return f"{bps:g}B/s"


def _size(text: str) -> int:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([a-z]*)", text.strip().lower())
    if not m or m.group(2) not in _UNITS:
        raise ProfileError(f"{text!r} is not a size (e.g. 4KiB, 64KB, 1MB)")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def _duration(text: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(ms|s)", text.strip().lower())
    if not m:
        raise ProfileError(f"{text!r} is not a duration (e.g. 20ms, 1.5s)")
    value = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)
    if value > _MAX_UPLOAD:
        raise ProfileError(f"{text!r}: at most {_MAX_UPLOAD:g}s")
    return value


_PROFILE_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,19}$")
_KEYS = ("upload", "pieces", "read", "rcvbuf")


def parse_profile(text: str) -> ClientProfile:
    """'mobile', 'mobile:read=1MB/s' (a named profile with one figure changed), or a
    profile of your own: 'mine:upload=20ms,read=64KB/s' (a new name starts from
    nothing: it must say what is slow). A key given twice is an error."""
    name, _, rest = text.strip().partition(":")
    name = name.strip().lower()
    if not _PROFILE_NAME.match(name):
        raise ProfileError(
            f"{text!r}: a profile is {', '.join(NAMED)}, or a name of your own (letters, "
            "digits, - and _), with KEY=VALUE figures (e.g. slow:upload=40ms, "
            "mine:upload=20ms,read=64KB/s)"
        )
    base = NAMED.get(name, ClientProfile(name, upload=0.0))
    fields: dict[str, Any] = msgspec.structs.asdict(base)
    fields["name"] = name
    seen: set[str] = set()
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, value = item.partition("=")
        key, value = key.strip().lower(), value.strip()
        if not eq or not value:
            raise ProfileError(f"{text!r}: {item!r} is not KEY=VALUE")
        if key in seen:
            raise ProfileError(f"{text!r}: {key} is given twice")
        seen.add(key)
        if key == "upload":
            fields["upload"] = _duration(value)
        elif key == "pieces":
            if not value.isdigit() or not 2 <= int(value) <= _MAX_PIECES:
                raise ProfileError(f"{text!r}: pieces must be a whole number from 2 to 64")
            fields["pieces"] = int(value)
        elif key == "read":
            if not value.lower().endswith("/s"):
                raise ProfileError(f"{text!r}: read is a rate, e.g. 64KB/s")
            bps = _size(value[:-2])
            if bps < 100:
                raise ProfileError(f"{text!r}: read must be at least 100B/s")
            fields["read"] = float(bps)
        elif key == "rcvbuf":
            size = _size(value)
            if not 1024 <= size <= 1 << 24:
                raise ProfileError(f"{text!r}: rcvbuf must be from 1KiB to 16MiB")
            fields["rcvbuf"] = size
        else:
            raise ProfileError(f"{text!r}: unknown key {key!r} ({', '.join(_KEYS)})")
    profile = ClientProfile(**fields)
    if not profile.upload and not profile.read:
        raise ProfileError(
            f"{text!r}: neither upload nor read is slow (give upload=DURATION or read=RATE)"
        )
    return profile


def parse_share(text: str) -> float:
    """'20%' or '0.2' → 0.2 (a share of connections, above 0, at most all of them)."""
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise ProfileError(f"{text!r} is not a share (e.g. 20% or 0.2)") from None
    if not 0 < value <= 1:
        raise ProfileError(f"{text!r}: a share is above 0 and at most 100%")
    return value


def is_slow(index: int, share: float) -> bool:
    """Whether the `index`-th connection slot (from 0) is slow, spreading `share` evenly."""
    return int((index + 1) * share + 1e-9) > int(index * share + 1e-9)


class SlowClient:
    """Between a Connection and its transport: the request in pieces, reads paced.

    To the transport it is the protocol (`connected`, `data_received`, `connection_lost`);
    to the Connection it is the transport (`write`, `close`, `abort`, `get_extra_info`)."""

    __slots__ = (
        "_next_read",
        "_queue",
        "_timer",
        "_writing",
        "conn",
        "loop",
        "profile",
        "transport",
    )

    def __init__(self, conn: Any, profile: ClientProfile, loop: asyncio.AbstractEventLoop) -> None:
        self.conn = conn
        self.profile = profile
        self.loop = loop
        self.transport: Any = None
        self._queue: deque[bytes] = deque()
        self._writing: asyncio.TimerHandle | None = None
        self._timer: asyncio.TimerHandle | None = None  # a paused read's resumption
        self._next_read = 0.0

    # --- the transport's protocol --------------------------------------------------------

    def connected(self, transport: Any, sent: bool) -> None:
        self.transport = transport
        self.conn.connected(self, sent)

    def connection_made(self, transport: Any) -> None:
        self.connected(transport, False)

    def data_received(self, data: bytes) -> None:
        self.conn.data_received(data)
        rate = self.profile.read
        if rate is None or self.transport is None or self.transport.is_closing():
            return
        now = self.loop.time()
        self._next_read = max(self._next_read, now) + len(data) / rate
        delay = self._next_read - now
        if delay > 0.001 and self._timer is None:
            self.transport.pause_reading()
            self._timer = self.loop.call_later(delay, self._resume)

    def _resume(self) -> None:
        self._timer = None
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        self.conn.connection_lost(exc)

    # --- the Connection's transport -------------------------------------------------------

    def write(self, data: bytes) -> None:
        p = self.profile
        if not p.upload or len(data) < 2:
            self._queue.append(data)
        else:
            n = min(p.pieces, len(data))
            step = -(-len(data) // n)
            self._queue.extend(data[i : i + step] for i in range(0, len(data), step))
        if self._writing is None:
            self._write_next()

    def _write_next(self) -> None:
        self._writing = None
        tr = self.transport
        if tr is None or tr.is_closing() or not self._queue:
            return
        tr.write(self._queue.popleft())
        if self._queue:
            p = self.profile
            self._writing = self.loop.call_later(p.upload / max(1, p.pieces - 1), self._write_next)

    def close(self) -> None:
        self._cancel()
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        self._cancel()
        if self.transport is not None:
            self.transport.abort()

    def is_closing(self) -> bool:
        return self.transport is None or self.transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if self.transport is None:
            return default
        return self.transport.get_extra_info(name, default)

    def _cancel(self) -> None:
        self._queue.clear()
        for h in (self._writing, self._timer):
            if h is not None:
                h.cancel()
        self._writing = self._timer = None
