"""Turning a target's URL and request shape into the exact bytes the engine sends."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

_BODYLESS_OK = frozenset({"GET", "HEAD", "DELETE", "OPTIONS", "TRACE"})


class RequestError(ValueError):
    """A URL or request shape the engine cannot send."""


@dataclass(frozen=True)
class ParsedUrl:
    host: str
    port: int
    target: str  # path and query, as sent on the request line
    host_header: str


def parse_url(url: str) -> ParsedUrl:
    parts = urlsplit(url)
    if parts.scheme != "http":
        raise RequestError(
            f"{url}: only http:// URLs are supported (got {parts.scheme or 'no'} scheme)"
        )
    if not parts.hostname:
        raise RequestError(f"{url}: no host in URL")
    try:
        port = parts.port or 80
    except ValueError as exc:
        raise RequestError(f"{url}: bad port ({exc})") from None
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    host = parts.hostname
    host_header = f"[{host}]" if ":" in host else host
    if port != 80:
        host_header += f":{port}"
    return ParsedUrl(host=host, port=port, target=target, host_header=host_header)


def build_request(
    url: str,
    method: str = "GET",
    headers: list[tuple[str, str]] | None = None,
    body: bytes = b"",
) -> bytes:
    """The full request, built once and written as is for every request on the target."""
    u = parse_url(url)
    method = method.upper()
    if not method.isalpha():
        raise RequestError(f"bad method {method!r}")
    given = {k.lower() for k, _ in headers or []}
    lines = [f"{method} {u.target} HTTP/1.1"]
    if "host" not in given:
        lines.append(f"Host: {u.host_header}")
    if "user-agent" not in given:
        lines.append("User-Agent: stackrace")
    if "accept" not in given:
        lines.append("Accept: */*")
    for key, value in headers or []:
        if "\r" in key or "\n" in key or "\r" in value or "\n" in value or ":" in key:
            raise RequestError(f"bad header {key!r}")
        lines.append(f"{key}: {value}")
    if "content-length" not in given and (body or method not in _BODYLESS_OK):
        lines.append(f"Content-Length: {len(body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + body
