"""Who may use `stackrace web`: the owner's token, the page's own origin, a few sessions.

Every page of `stackrace web` starts an app process, and the app starts servers and sends
load: a page is as powerful as a shell. Without a gate any web page open in a browser on
the machine could open a WebSocket to 127.0.0.1 (browsers allow cross-site WebSockets)
and any local user could connect; fifteen such connections started fifteen apps. So,
as Jupyter does:

- **A token.** The server makes a random one at start (`new_token`, 256 bits) and prints
  the page's URL with it (`?token=…`). A request carries it in the query, or in the
  cookie the first page load sets (HttpOnly, SameSite=Strict, named after the port so
  that two servers on one host keep theirs apart). Compared in constant time.
- **The page's own origin.** A browser names the page that opens a WebSocket in its
  `Origin` header; a request whose Origin is not this server's page (its scheme and
  Host, or the --public-url's) is refused, token or not: a cross-site page can never
  reach the app even when the cookie would be sent.
- **This server's host names.** Bound to loopback, the Host header must be a loopback
  name (127.0.0.1, localhost, [::1]) or the public URL's host: a DNS-rebinding page
  (evil.example resolving to 127.0.0.1) is its own origin, and this is what refuses it.
- **A few sessions.** At most `max_sessions` pages at once (each starts its own stacks);
  one more is refused with 429 before anything starts. `--max-sessions` itself is at
  most `MAX_SESSIONS_CAP`: each page is an app with its own servers, and 100,000 of
  them is no setting a machine can hold, only a way to lift the limit by mistake.
- **A public URL that is a web page's.** `--public-url` is printed as the URL to open
  and used as an origin: only `http://` or `https://` with a host, printable, no
  user or password in it (`public_url_problem`); `javascript:alert(1)` was printed
  as the link to open.
- **The token said once.** The line that hands the URL to the owner is the only one
  that carries the token: `redact` takes it out of every later line (aiohttp's access
  log wrote the whole request line, `?token=…` and a Referer holding it, for every
  request).

`WebGate.check` decides (None, or the status and the one line why); the server
(tui/web.py) asks it before any handler runs, so a refused request starts nothing.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from dataclasses import dataclass, field
from urllib.parse import urlsplit

TOKEN_PARAM = "token"
DEFAULT_MAX_SESSIONS = 2
MAX_SESSIONS_CAP = 64  # see the module docstring
_PUBLIC_URL_LIMIT = 2048
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def new_token() -> str:
    return secrets.token_urlsafe(32)


def public_url_problem(url: str) -> str | None:
    """None when `url` may be the page's public URL (see the module docstring), else
    why not, in words that start with the option."""
    shown = repr(url[:80])  # repr: a control character in it is shown, never sent raw
    if len(url) > _PUBLIC_URL_LIMIT or not url.isprintable() or any(c.isspace() for c in url):
        return f"--public-url {shown}: not a URL (spaces or control characters)"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError:
        return f"--public-url {shown}: not a URL"
    if parts.scheme.lower() not in ("http", "https"):
        return f"--public-url {shown}: only an http:// or https:// URL is a page to open"
    if not parts.hostname:
        return f"--public-url {shown}: no host (e.g. https://race.example)"
    if parts.username is not None or parts.password is not None:
        return f"--public-url {shown}: no user or password in it (it is printed)"
    if parts.query or parts.fragment:
        return f"--public-url {shown}: no query or fragment (the token is added to it)"
    return None


def max_sessions_problem(n: int) -> str | None:
    """None when `n` pages at once is a setting to honour, else the one line why not."""
    if n > MAX_SESSIONS_CAP:
        return (
            f"--max-sessions {n}: at most {MAX_SESSIONS_CAP} (each page runs its own app "
            "and stacks on this machine)"
        )
    return None


def redact(text: str, token: str) -> str:
    """`text` without the token: what every line after the first that hands it out is."""
    return text.replace(token, "[token]") if token and token in text else text


def cookie_name(port: int) -> str:
    return f"stackrace-web-{port}"


def _split_host(host: str) -> tuple[str, int | None]:
    """'127.0.0.1:8566' → ('127.0.0.1', 8566); '[::1]:80' → ('::1', 80); no port: None."""
    parts = urlsplit(f"//{host}")
    try:
        port = parts.port
    except ValueError:
        port = -1  # unparsable: matches nothing
    return (parts.hostname or "").lower(), port


def _is_loopback_name(name: str) -> bool:
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass
class WebGate:
    """The owner's token, the hosts and origins that are the page's own, and the count of
    live sessions."""

    token: str
    port: int
    loopback: bool  # bound to a loopback address (else --web-remote)
    public_url: str | None = None
    max_sessions: int = DEFAULT_MAX_SESSIONS
    sessions: int = field(default=0, init=False)

    @property
    def cookie(self) -> str:
        return cookie_name(self.port)

    def _public(self) -> tuple[str, str] | None:
        """(origin, host name) of --public-url."""
        if not self.public_url:
            return None
        parts = urlsplit(self.public_url)
        if not parts.scheme or not parts.netloc:
            return None
        return f"{parts.scheme}://{parts.netloc}".lower(), (parts.hostname or "").lower()

    def host_allowed(self, host: str) -> bool:
        name, port = _split_host(host)
        public = self._public()
        if public is not None and name == public[1]:
            return True
        if not self.loopback:
            return bool(name)  # listening for other hosts: any name of this machine
        return _is_loopback_name(name) and port in (None, self.port)

    def origin_allowed(self, origin: str | None, host: str, secure: bool) -> bool:
        """No Origin (not a browser: a script with the token) or the page's own."""
        if origin is None:
            return True
        origin = origin.strip().lower().rstrip("/")
        own = {f"{'https' if secure else 'http'}://{host.lower()}"}
        public = self._public()
        if public is not None:
            own.add(public[0])
        return origin in own

    def token_ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def check(
        self,
        *,
        host: str,
        origin: str | None,
        secure: bool,
        query_token: str | None,
        cookie_token: str | None,
    ) -> tuple[int, str] | None:
        """None when the request may go on, else (status, why): 403 for a request not
        the owner's page's. The session limit is `open_session`'s."""
        if not self.host_allowed(host):
            return 403, f"stackrace web: Host {host[:80]!r} is not this server's"
        if not self.origin_allowed(origin, host, secure):
            page = (origin or "")[:80]
            return 403, f"stackrace web: a page from {page!r} may not use this server"
        if not (self.token_ok(query_token) or self.token_ok(cookie_token)):
            return 403, (
                "stackrace web: open the URL with the token that `stackrace web` printed "
                "(…/?token=…)"
            )
        return None

    def open_session(self) -> tuple[int, str] | None:
        """Count one more live page; (429, why) when there are `max_sessions` already."""
        if self.sessions >= self.max_sessions:
            return 429, (
                f"stackrace web: {self.max_sessions} pages are open already (each runs its own "
                "stacks); close one, or start the server with --max-sessions"
            )
        self.sessions += 1
        return None

    def close_session(self) -> None:
        self.sessions = max(0, self.sessions - 1)
