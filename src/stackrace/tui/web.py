"""The app in a browser: textual-serve runs one app process per page (see
`stackrace.commands.web` for the command each page runs and how its stacks stop).

**The owner's pages only.** textual-serve starts an app for any WebSocket to /ws. Here
every request (the page, its WebSocket, its static files, downloads) first goes through
`stackrace.base.webgate.WebGate`: the token printed at start, the page's own origin and host,
and a limit on live pages. A request it refuses gets a 403 (or 429) from a middleware
that runs before textual-serve's handler, so nothing is started for it. The page is
opened with `?token=…` once; the response sets a cookie holding the token (HttpOnly,
SameSite=Strict), which the page's own WebSocket and files then carry.

**Nothing from the internet.** A meetup venue is often offline, and a page that waits
for a font server shows nothing useful. textual-serve's page asks Google Fonts for its
one web font (Roboto Mono), though the package ships that font's files among its own
static files; everything else (its script, its style sheet) it serves itself. The page
served here is textual-serve's own template with that one link replaced by an
`@font-face` for the shipped file, written to a private temporary directory for the
server's lifetime. Should a later textual-serve add another outside URL, `serve` says
so in one line rather than hide it (`tests/e2e/test_web.py` opens the page in Chromium
with every outside host unreachable and checks that no request leaves the machine).
"""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from stackrace.base.printable import terminal
from stackrace.base.webgate import (
    DEFAULT_MAX_SESSIONS,
    TOKEN_PARAM,
    WebGate,
    new_token,
    redact,
)

# the font textual-serve ships (static/fonts), declared where the page asked Google
_FONT_FACE = (
    "<style>@font-face { font-family: 'Roboto Mono'; font-weight: 100 700; "
    "src: url('{{ config.static.url }}fonts/RobotoMono-VariableFont_wght.ttf') "
    "format('truetype'); }</style>"
)
_GOOGLE_FONTS = re.compile(r"<link\b[^>]*https?://fonts\.googleapis\.com[^>]*>", re.S)
# a URL the page would fetch from elsewhere (an href or src off this server)
_OUTSIDE = re.compile(r"""(?:href|src)\s*=\s*["'](https?://[^"']+)""")


def offline_page(template: str) -> tuple[str, list[str]]:
    """textual-serve's page template with its web font served locally, and any URL
    outside this server it still loads."""
    text = _GOOGLE_FONTS.sub(_FONT_FACE, template)
    return text, _OUTSIDE.findall(text)


def _offline_templates() -> tuple[Path, list[str]]:
    import textual_serve  # lazy: only for the web view

    shipped = Path(textual_serve.__file__).parent / "templates" / "app_index.html"
    text, outside = offline_page(shipped.read_text(encoding="utf-8"))
    directory = Path(tempfile.mkdtemp(prefix="stackrace-web-"))  # 0700, ours alone
    (directory / "app_index.html").write_text(text, encoding="utf-8")
    return directory, outside


def _owned_server(gate: WebGate) -> type:
    """textual-serve's Server with the gate in front of every request (see the module
    docstring) and the URL printed with its token."""
    from aiohttp import web  # lazy: only for the web view
    from textual_serve.server import Server  # lazy: only for the web view

    @web.middleware
    async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
        query_token = request.query.get(TOKEN_PARAM)
        refused = gate.check(
            host=request.host,
            origin=request.headers.get("Origin"),
            secure=request.secure,
            query_token=query_token,
            cookie_token=request.cookies.get(gate.cookie),
        )
        if refused is not None:
            return web.Response(status=refused[0], text=refused[1] + "\n")
        if request.path == "/ws":
            full = gate.open_session()
            if full is not None:
                return web.Response(status=full[0], text=full[1] + "\n")
            try:
                return await handler(request)
            finally:
                gate.close_session()
        response = await handler(request)
        if gate.token_ok(query_token) and isinstance(response, web.Response):
            # the page's WebSocket and files carry it from here (same site only)
            response.set_cookie(gate.cookie, gate.token, httponly=True, samesite="Strict")
        return response

    class OwnedServer(Server):
        def initialize_logging(self) -> None:
            super().initialize_logging()
            # every log line after the one that hands out the URL: no token (aiohttp's
            # access log writes each request line and Referer, `?token=…` included) and
            # no control character of a request's (its path, its User-Agent)
            quiet = _TokenFilter(gate.token)
            for handler in logging.getLogger().handlers:
                handler.addFilter(quiet)

        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            app.middlewares.append(guard)  # before any handler: a refused request starts nothing
            return app

        async def on_startup(self, app: web.Application) -> None:
            # the startup hooks run before the socket listens: the URL is printed once it
            # does, so that whoever opens it at once is not refused
            self._said = asyncio.get_running_loop().create_task(self._say_when_listening())

        async def _say_when_listening(self) -> None:
            host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
            for _ in range(200):
                try:
                    _reader, writer = await asyncio.open_connection(host, self.port)
                except OSError:
                    await asyncio.sleep(0.05)
                    continue
                writer.close()
                break
            print(f"stackrace web: open {page_url(self.public_url, gate.token)}", flush=True)
            print(
                "  (the token in the URL is this server's: whoever has it can start servers "
                "and send load from this machine; Ctrl-C stops)",
                flush=True,
            )

    return OwnedServer


class _TokenFilter(logging.Filter):
    """Takes the token out of a log record (stackrace.base.webgate.redact) and makes its
    text printable (a request's path and headers are a client's)."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        clean = terminal(redact(text, self.token))
        if clean != text:
            record.msg, record.args = clean, None
        return True


def page_url(public_url: str, token: str) -> str:
    """The URL to open: the server's page with its token."""
    return f"{public_url.rstrip('/')}/?{urlencode({TOKEN_PARAM: token})}"


def serve(
    command: str,
    host: str,
    port: int,
    public_url: str | None,
    *,
    loopback: bool = True,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
) -> int:
    """Serve `command` (a shell command running the app) until Ctrl-C; an exit code."""
    try:
        import textual_serve.server  # noqa: F401  (lazy: only for the web view)
    except ImportError:
        print(
            "stackrace web: textual-serve is not installed (pip install textual-serve)",
            file=sys.stderr,
        )
        return 2
    gate = WebGate(
        new_token(), port, loopback=loopback, public_url=public_url, max_sessions=max_sessions
    )
    templates, outside = _offline_templates()
    for url in outside:
        print(f"stackrace web: the page still loads {url} from the internet", file=sys.stderr)
    try:
        _owned_server(gate)(
            command,
            host=host,
            port=port,
            title="stackrace",
            public_url=public_url,
            templates_path=templates,
        ).serve()
    except OSError as exc:  # the address cannot be bound (taken since the check, not ours)
        print(
            f"stackrace web: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr
        )
        return 2
    finally:
        shutil.rmtree(templates, ignore_errors=True)
    return 0
