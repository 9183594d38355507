"""A stack that refused its readiness probe, said in one line: the status, what the
body says, and the likely cause.

    refusal_line(resp, sent, "200-399")
    # '400 "Bad Request (400)", not 200-399: the app may reject the Host header: set
    #  -H 'Host: …' or its allowed hosts'

An app set for production answers a probe it does not expect with a 4xx and an HTML
page (Django's DEBUG=False 400 for a Host outside ALLOWED_HOSTS, a login wall's 401,
a 404 page). The page's markup says nothing a person needs: the first line of its text
(the page's title, else its first line of text) does, and the common causes are few and
known. The body is a server's text on its way to a terminal, so only printable
characters are kept (an escape sequence in a body must not reach the screen).
"""

from __future__ import annotations

import html
import re

from stackrace.stacks.probe import ProbeResponse

_MAX_TEXT = 120
_TITLE = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_HIDDEN = re.compile(r"<(script|style|head)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")
_BREAK = re.compile(r"<(?:br|/p|/h\d|/div|/li|/title)\b[^>]*>", re.IGNORECASE)


def _printable(text: str) -> str:
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())


def body_text(resp: ProbeResponse) -> str:
    """The first line of the body's text, markup removed ('' for an empty body)."""
    raw = resp.body[:65536].decode("utf-8", "replace")
    looks_html = "html" in resp.content_type.lower() or raw.lstrip()[:1] == "<"
    if looks_html:
        title = _TITLE.search(raw)
        if title and _printable(html.unescape(title.group(1))):
            return _cut(_printable(html.unescape(title.group(1))))
        raw = html.unescape(_TAG.sub(" ", _BREAK.sub("\n", _HIDDEN.sub(" ", raw))))
    for line in raw.splitlines():
        text = _printable(line)
        if text:
            return _cut(text)
    return ""


def _cut(text: str) -> str:
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 1] + "…"


def hint(status: int, sent: dict[str, str]) -> str:
    """The likely cause of a 4xx at readiness, and what to do ('' when none is known).
    `sent`: the headers the user asked the probe to send (-H, a scenario's)."""
    host = next((v for k, v in sent.items() if k.lower() == "host"), None)
    if status in (400, 421):
        if host is not None:
            return f"the app may reject the Host header {host!r}: check its allowed hosts"
        return "the app may reject the Host header: set -H 'Host: …' or its allowed hosts"
    if status in (401, 403):
        return "the app may want credentials: set -H 'Authorization: …' (or a Cookie)"
    if status == 404:
        return "no such path in the app: give --path with one it serves"
    if status == 405:
        return "the path does not answer GET, which readiness sends: --path with one that does"
    return ""


def refusal_line(resp: ProbeResponse, sent: dict[str, str], expected: str) -> str:
    """'400 "Bad Request (400)", not 200-399: the app may reject the Host header: …'"""
    text = body_text(resp)
    out = f"{resp.status}" + (f' "{text}"' if text else " (no body)") + f", not {expected}"
    cause = hint(resp.status, sent)
    return f"{out}: {cause}" if cause else out
