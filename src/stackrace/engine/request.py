"""Turning a target's URL and request shape into the exact bytes the engine sends.

Every piece of user text that reaches the wire is checked against the grammar it must
obey, because the engine writes these bytes as they are for every request: a space, CR
or LF in a URL would split the request line (`GET /hello world`), or smuggle a header
in (`GET /x\\r\\nX-Inj: 1`). Python's `urlsplit` silently *removes* CR, LF and TAB from a
URL (bpo-43882), so the raw text is checked before it is split, not after.

- request target (path and query): RFC 3986 `pchar`, `/` and `?`, and `%XX` escapes;
  a fragment (`#…`) is never sent;
- method and header names: RFC 9110 `token`;
- header values: visible characters, spaces and tabs (RFC 9110 `field-value`), no CR,
  LF or NUL; obs-text (bytes 0x80–0xFF) is refused too, since this engine writes text;
- host: a DNS name or an IPv4/IPv6 literal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from stackrace.base.errors import StackraceError

_BODYLESS_OK = frozenset({"GET", "HEAD", "DELETE", "OPTIONS", "TRACE"})
SCHEMES = {"http": 80, "https": 443}

# RFC 9110 §5.6.2: token = 1*tchar
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# RFC 3986: pchar = unreserved / pct-encoded / sub-delims / ":" / "@"; path adds "/",
# query adds "/" and "?"
_TARGET = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*")
# RFC 9110 §5.5: field-value = *field-content (VCHAR, SP, HTAB)
_FIELD_VALUE = re.compile(r"[\x21-\x7e \t]*")
_HOSTNAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9\-.]*[A-Za-z0-9])?")
# characters no URL the engine accepts may hold anywhere (before urlsplit drops some)
_CONTROL = re.compile(r"[\x00-\x20\x7f]")


class RequestError(StackraceError, ValueError):
    """A URL or request shape the engine cannot send."""


@dataclass(frozen=True)
class ParsedUrl:
    host: str
    port: int
    target: str  # path and query, as sent on the request line
    host_header: str
    tls: bool = False  # https://


def _describe(ch: str) -> str:
    names = {" ": "a space", "\r": "a CR", "\n": "an LF", "\t": "a tab", "\x00": "a NUL"}
    return names.get(ch, f"{ch!r}")


def parse_url(url: str) -> ParsedUrl:
    bad = _CONTROL.search(url)
    if bad:
        raise RequestError(
            f"{url!r}: {_describe(bad.group())} is not allowed in a URL "
            "(percent-encode it, e.g. %20 for a space)"
        )
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise RequestError(
            f"{url}: only http:// and https:// URLs are supported "
            f"(got {parts.scheme or 'no'} scheme)"
        )
    host = parts.hostname
    if not host:
        raise RequestError(f"{url}: no host in URL")
    if ":" not in host and not _HOSTNAME.fullmatch(host):
        raise RequestError(f"{url}: {host!r} is not a host name or an IP address")
    try:
        port = parts.port or SCHEMES[parts.scheme]
    except ValueError as exc:
        raise RequestError(f"{url}: bad port ({exc})") from None
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    if not target.startswith("/") or not _TARGET.fullmatch(target):
        ch = next((c for c in target if not _TARGET.fullmatch(c)), "%")
        raise RequestError(
            f"{url}: {_describe(ch)} is not allowed in a request target (percent-encode it)"
        )
    host_header = f"[{host}]" if ":" in host else host
    if port != SCHEMES[parts.scheme]:
        host_header += f":{port}"
    return ParsedUrl(
        host=host, port=port, target=target, host_header=host_header, tls=parts.scheme == "https"
    )


# methods whose answers the engine cannot count as a request's answer: HEAD's carries a
# Content-Length with no body after it, CONNECT's 2xx starts a tunnel
_UNANSWERABLE = {
    "HEAD": "HEAD is not supported (its answers have no body to read)",
    "CONNECT": "CONNECT is not supported (its answer starts a tunnel, not a response)",
}


def check_method(method: str) -> str:
    """The method, upper-cased, if it is an RFC 9110 token of at most 20 characters that
    the engine can measure; RequestError otherwise. The one rule for every method a user
    gives (-m, a scenario file, the engine's own requests)."""
    if not _TOKEN.fullmatch(method) or len(method) > 20:
        raise RequestError(
            f"bad method {method[:30]!r}: a method is a token of at most 20 letters, digits or -"
        )
    upper = method.upper()
    if upper in _UNANSWERABLE:
        raise RequestError(_UNANSWERABLE[upper])
    return upper


def check_header(name: str, value: str) -> None:
    """RequestError unless `name: value` is a header the engine may send as is."""
    if not _TOKEN.fullmatch(name):
        raise RequestError(
            f"bad header name {name!r}: a header name is a token (letters, digits, -)"
        )
    if not _FIELD_VALUE.fullmatch(value):
        ch = next(c for c in value if not _FIELD_VALUE.fullmatch(c))
        raise RequestError(f"bad header {name!r}: {_describe(ch)} is not allowed in its value")


def check_framing(method: str, headers: list[tuple[str, str]], body: bytes) -> bool:
    """Whether the request goes out chunked; RequestError when the user's framing
    headers would not say what is sent. The body's length is framed once, by one
    header: a user `Transfer-Encoding: chunked` makes the engine chunk the body (and
    send no Content-Length: both at once is the request-smuggling shape); any other
    coding is refused (the engine cannot produce it); a user `Content-Length` must be
    the body's length (`Content-Length: 999999` on a GET with no body is refused)."""
    te = [v for k, v in headers if k.lower() == "transfer-encoding"]
    cl = [v for k, v in headers if k.lower() == "content-length"]
    if te and cl:
        raise RequestError(
            "give Content-Length or Transfer-Encoding, not both: a server and a proxy "
            "could read where the request ends differently (request smuggling)"
        )
    if te:
        codings = [c.strip().lower() for v in te for c in v.split(",")]
        if codings != ["chunked"]:
            raise RequestError(
                f"Transfer-Encoding {', '.join(te)!r}: only 'chunked' can be sent (the "
                "engine then chunks the body)"
            )
        return True
    for v in cl:
        if not (v.strip().isascii() and v.strip().isdigit()) or int(v) != len(body):
            raise RequestError(
                f"Content-Length {v.strip()!r} does not match the body ({len(body):,} "
                "bytes): leave the header out, the engine sends the right one"
            )
    return False


def _chunked(body: bytes) -> bytes:
    """The body as one chunk and the last chunk (RFC 9112 §7.1)."""
    return (f"{len(body):x}\r\n".encode() + body + b"\r\n" if body else b"") + b"0\r\n\r\n"


def build_request(
    url: str,
    method: str = "GET",
    headers: list[tuple[str, str]] | None = None,
    body: bytes = b"",
) -> bytes:
    """The full request, built once and written as is for every request on the target.
    The user's headers go out as written or are refused (`check_framing`)."""
    u = parse_url(url)
    method = check_method(method)
    headers = list(headers or [])
    given = {k.lower() for k, _ in headers}
    lines = [f"{method} {u.target} HTTP/1.1"]
    if "host" not in given:
        lines.append(f"Host: {u.host_header}")
    if "user-agent" not in given:
        lines.append("User-Agent: stackrace")
    if "accept" not in given:
        lines.append("Accept: */*")
    for key, value in headers:
        check_header(key, value)
        lines.append(f"{key}: {value}")
    chunked = check_framing(method, headers, body)
    if chunked:
        body = _chunked(body)
    elif "content-length" not in given and (body or method not in _BODYLESS_OK):
        lines.append(f"Content-Length: {len(body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + body
