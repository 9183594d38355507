"""stackrace.webgate: who may use `stackrace web` (the token, the page's own origin and
host, the live pages). The real server behind it: tests/hardening/test_web_owner.py."""

from __future__ import annotations

from typing import Any

from stackrace.base.webgate import WebGate, new_token
from stackrace.commands.web import app_command


def _gate(**kw: Any) -> WebGate:
    return WebGate("secret-token", 8566, **{"loopback": True, **kw})


def _check(gate: WebGate, **kw: Any) -> tuple[int, str] | None:
    request: dict[str, Any] = {
        "host": "127.0.0.1:8566",
        "origin": "http://127.0.0.1:8566",
        "secure": False,
        "query_token": "secret-token",
        "cookie_token": None,
        **kw,
    }
    return gate.check(**request)


def test_the_owners_page_passes_with_the_token_in_the_query_or_the_cookie() -> None:
    gate = _gate()
    assert _check(gate) is None
    assert _check(gate, query_token=None, cookie_token="secret-token") is None
    assert _check(gate, origin=None) is None  # a script with the token (no browser)
    assert _check(gate, host="localhost:8566", origin="http://localhost:8566") is None
    assert _check(gate, host="[::1]:8566", origin="http://[::1]:8566") is None


def test_no_token_a_wrong_one_another_origin_or_host_is_refused() -> None:
    gate = _gate()
    for kw in (
        {"query_token": None},
        {"query_token": "secret-tokeN"},
        {"query_token": ""},
        {"origin": "http://evil.example"},
        {"origin": "null"},
        {"origin": "http://127.0.0.1:9999"},  # another server on this machine
        {"origin": "https://127.0.0.1:8566"},  # another scheme is another origin
        # DNS rebinding: a name of the attacker's own resolving to 127.0.0.1
        {"host": "evil.example:8566", "origin": "http://evil.example:8566"},
        {"host": "127.0.0.1:9999", "origin": "http://127.0.0.1:9999"},
    ):
        refused = _check(gate, **kw)
        assert refused is not None and refused[0] == 403, kw


def test_public_url_and_web_remote() -> None:
    behind = _gate(public_url="https://race.example.org")
    assert _check(behind, host="race.example.org", origin="https://race.example.org") is None
    remote = _gate(loopback=False)  # --web-remote: any host name, still the token
    assert _check(remote, host="192.0.2.7:8566", origin="http://192.0.2.7:8566") is None
    assert _check(remote, host="192.0.2.7:8566", origin="http://192.0.2.7:8566", query_token=None)
    assert _check(remote, host="192.0.2.7:8566", origin="http://evil.example")


def test_sessions_are_counted_and_limited() -> None:
    gate = _gate(max_sessions=2)
    assert gate.open_session() is None and gate.open_session() is None
    full = gate.open_session()
    assert full is not None and full[0] == 429
    gate.close_session()
    assert gate.open_session() is None


def test_tokens_are_new_and_long() -> None:
    tokens = {new_token() for _ in range(100)}
    assert len(tokens) == 100 and all(len(t) >= 43 for t in tokens)


def test_max_sessions_is_webs_own_option() -> None:
    cmd = app_command(["web", "--max-sessions", "3", "--demo", "--go"])
    assert cmd.endswith("-m stackrace --demo --go") and "3" not in cmd.split()[-3:]
