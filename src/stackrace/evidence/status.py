"""A stack's own status page, read once in an evidence window: PHP-FPM's `status?json`,
nginx's `stub_status`, uWSGI's stats (JSON over HTTP, `--stats-http`, or the plain
stats socket, `tcp://127.0.0.1:PORT`).

The server knows what the kernel cannot: PHP-FPM how many of its children are busy and
how deep its own listen queue is, uWSGI which workers are busy. Whichever format
answers is parsed; the figures are kept as numbers (`status`), named as the page names
them, so a report can show them and a cause can use them.

The page is text from a server: hostile. It is read from loopback only (the stacks
listen there; anything else is refused), at most `MAX_BYTES`, within `TIMEOUT`
seconds, and only numbers are taken out of it.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from stackrace.base.netguard import RemoteTargetError, is_loopback

MAX_BYTES = 1 << 16
TIMEOUT = 1.0

_NGINX = re.compile(
    rb"Active connections:\s*(\d+).*?(\d+)\s+(\d+)\s+(\d+).*?Reading:\s*(\d+)\s*"
    rb"Writing:\s*(\d+)\s*Waiting:\s*(\d+)",
    re.S,
)
_FPM_KEYS = (
    "listen queue", "max listen queue", "listen queue len", "idle processes",
    "active processes", "total processes", "max active processes", "max children reached",
    "slow requests", "accepted conn",
)  # fmt: skip


def _read(url: str) -> bytes:
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        local = is_loopback(host)
    except RemoteTargetError:
        local = False
    if not local:
        return b""
    if parts.scheme == "tcp":  # uWSGI's stats socket: it writes its JSON and closes
        with socket.create_connection((host, parts.port or 0), timeout=TIMEOUT) as s:
            chunks, size = [], 0
            while size < MAX_BYTES:
                chunk = s.recv(MAX_BYTES - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            return b"".join(chunks)
    if parts.scheme != "http":
        return b""
    # no proxy: the page is on this machine
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=TIMEOUT) as r:
        return bytes(r.read(MAX_BYTES))


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    return None


def parse_status(body: bytes) -> tuple[str, dict[str, float]]:
    """(source, figures) of a status page's body; ("", {}) when it is none of the three."""
    m = _NGINX.search(body[:MAX_BYTES])
    if m:
        names = ("active", "accepts", "handled", "requests", "reading", "writing", "waiting")
        return "nginx stub_status", {k: float(v) for k, v in zip(names, m.groups(), strict=True)}
    try:
        data = json.loads(body[:MAX_BYTES])
    except (ValueError, UnicodeDecodeError):
        return "", {}
    if not isinstance(data, dict):
        return "", {}
    if "listen queue" in data or "active processes" in data:
        figures = {k: n for k in _FPM_KEYS if (n := _number(data.get(k))) is not None}
        return "php-fpm status", figures
    if "listen_queue" in data or "workers" in data:
        figures = {}
        for k in ("listen_queue", "listen_queue_errors", "signal_queue", "load"):
            if (n := _number(data.get(k))) is not None:
                figures[k] = n
        workers = data.get("workers")
        if isinstance(workers, list):
            statuses = [w.get("status") for w in workers if isinstance(w, dict)]
            figures["workers"] = float(len(statuses))
            figures["busy workers"] = float(sum(1 for s in statuses if s == "busy"))
            figures["idle workers"] = float(sum(1 for s in statuses if s == "idle"))
        return "uwsgi stats", figures
    return "", {}


def read_status(url: str) -> tuple[str, dict[str, float]]:
    """The status page at `url` (loopback only), parsed; ("", {}) when it does not answer
    or is not one the parser knows."""
    with contextlib.suppress(OSError, urllib.error.URLError, ValueError):
        return parse_status(_read(url))
    return "", {}
