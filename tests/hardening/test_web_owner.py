"""`stackrace web` has an owner: a WebSocket or page without the printed token, from
another origin, or naming another host, is refused (403) and starts no app process; at
most --max-sessions pages run at once (and --max-sessions is at most 64); a --public-url
that is not http(s) with a host is refused; no line after the URL carries the token (the
access log did). The real server (textual-serve behind stackrace.webgate) on 127.0.0.1,
spoken to as a browser and a hostile page would."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import aiohttp
import psutil
import pytest

from tests.helpers import ROOT, free_port

pytestmark = pytest.mark.slow

_URL = re.compile(r"open (http://\S+/\?token=(\S+))")


def _apps(server: subprocess.Popen[str]) -> list[psutil.Process]:
    """The app processes the server started: its own children, one per accepted page
    (what each page's app starts in turn, its engine, comes a moment later and is not
    another page: counting it made the session limit's test race the app's start-up)."""
    try:
        kids = psutil.Process(server.pid).children(recursive=False)
    except psutil.NoSuchProcess:
        return []
    out = []
    for p in kids:
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            continue
    return out


@pytest.fixture
def web() -> Iterator[tuple[subprocess.Popen[str], int, str]]:
    """`stackrace web --demo --go …` (the synthetic race: an accepted page starts an app,
    never a server), its port and the token it printed."""
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "stackrace",
            "web",
            "--port",
            str(port),
            "--max-sessions",
            "1",
            "--demo",
            "--go",
            "--stacks",
            "uvicorn,aiohttp",
        ],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        token = ""
        end = time.monotonic() + 30
        assert server.stdout is not None
        while time.monotonic() < end:
            line = server.stdout.readline()
            m = _URL.search(line)
            if m:
                assert m.group(1).startswith(f"http://127.0.0.1:{port}/?token=")
                token = m.group(2)
                break
        assert token, "stackrace web printed no URL with a token"
        yield server, port, token
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


async def _ws(port: int, query: str = "", **headers: str) -> int:
    """The status a WebSocket handshake to /ws gets (101: accepted), closed at once."""
    async with aiohttp.ClientSession() as http:
        try:
            async with http.ws_connect(f"http://127.0.0.1:{port}/ws{query}", headers=headers) as ws:
                await ws.close()
                return 101
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status


async def _get(port: int, path: str, **headers: str) -> int:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}{path}", headers=headers) as r,
    ):
        return r.status


async def test_a_websocket_without_the_owners_token_or_origin_starts_nothing(web) -> None:
    server, port, token = web
    own = f"http://127.0.0.1:{port}"
    # the attack of the report: a page of another site, then many connections
    for _ in range(5):
        assert await _ws(port, Origin="http://evil.example") == 403
    # no token at all, a wrong one, the right one from the wrong origin, a rebinding name
    assert await _ws(port, Origin=own) == 403
    assert await _ws(port, "?token=" + "x" * len(token), Origin=own) == 403
    assert await _ws(port, f"?token={token}", Origin="http://evil.example") == 403
    assert await _ws(port, f"?token={token}", Origin="null") == 403
    assert await _ws(port, f"?token={token}", Host=f"evil.example:{port}") == 403
    assert await _get(port, "/") == 403
    assert await _get(port, "/static/js/textual.js") == 403
    await asyncio.sleep(0.5)
    assert _apps(server) == [], "a refused request started a process"
    # the owner's page (the page's own origin, the token): accepted
    assert await _get(port, f"/?token={token}") == 200
    assert await _ws(port, f"?token={token}&width=80&height=24", Origin=own) == 101


async def test_one_more_page_than_max_sessions_is_refused(web) -> None:
    server, port, token = web
    own = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as http:
        first = await http.ws_connect(
            f"http://127.0.0.1:{port}/ws?token={token}&width=80&height=24", headers={"Origin": own}
        )
        try:
            for _ in range(50):  # the first page's app starts
                if _apps(server):
                    break
                await asyncio.sleep(0.1)
            started = {p.pid for p in _apps(server)}
            assert started
            assert await _ws(port, f"?token={token}", Origin=own) == 429
            await asyncio.sleep(0.5)
            assert {p.pid for p in _apps(server)} <= started  # nothing more started
        finally:
            await first.close()


async def test_the_token_is_in_no_line_after_the_url(web) -> None:
    """aiohttp's access log wrote every request line and Referer, `?token=…` with them:
    the line that hands out the URL is now the only one that carries the token."""
    server, port, token = web
    own = f"http://127.0.0.1:{port}"
    assert await _get(port, f"/?token={token}") == 200
    assert await _get(port, f"/?token={token}&fontsize=16", Referer=f"{own}/?token={token}") == 200
    assert await _get(port, "/static/js/textual.js", Referer=f"{own}/?token={token}") == 403
    assert await _ws(port, "?token=wrong", Origin=own) == 403
    server.send_signal(signal.SIGINT)
    rest, _ = server.communicate(timeout=15)
    assert "GET /" in rest, rest  # the access log is there ...
    assert token not in rest, rest  # ... without the token
    assert "[token]" in rest, rest


@pytest.mark.parametrize(
    "args, words",
    [
        (["--public-url", "javascript:alert(1)"], ["--public-url", "http:// or https://"]),
        (["--public-url", "file:///etc/passwd"], ["--public-url", "http:// or https://"]),
        (["--public-url", "https://"], ["--public-url", "no host"]),
        (["--public-url", "https://u:p@race.example"], ["--public-url", "no user or password"]),
        (["--public-url", "https://race.example/\x1b]0;x\x07"], ["--public-url", "\\x1b"]),
        (["--max-sessions", "100000"], ["--max-sessions 100000", "at most 64"]),
    ],
)
def test_a_public_url_that_is_not_a_web_page_or_too_many_sessions_is_one_line(
    args: list[str], words: list[str]
) -> None:
    from tests.hardening.cli_forks import run_forked
    from tests.hardening.conftest import assert_one_line_error

    r = run_forked("web", "--port", str(free_port()), *args)
    line = assert_one_line_error(r, *words)
    assert "\x1b" not in r.stderr + r.stdout, line
    assert "stackrace web: open" not in r.stdout
