"""HTTP/2's request of one kind (engine/h2.py `build_h2_request`, the C `H2Request`)
and the names of HTTP/2's error codes, without a socket: the same checks as HTTP/1.1's
request, and what HTTP/2 forbids left out."""

from __future__ import annotations

import pytest

from stackrace.engine._cycle import H2Request
from stackrace.engine.h2 import build_h2_request, error_name
from stackrace.engine.request import RequestError


def test_an_h2_request_is_built_with_the_http1_checks() -> None:
    req = build_h2_request("https://127.0.0.1:8443/a?b=1", "POST", [("X-A", "1")], b"body")
    assert isinstance(req, H2Request)
    with pytest.raises(RequestError):
        build_h2_request("http://127.0.0.1/", "GET", [("Bad Name", "x")], b"")
    with pytest.raises(RequestError):
        build_h2_request("http://127.0.0.1/", "HEAD", [], b"")


def test_connection_specific_headers_are_no_error() -> None:
    # RFC 9113 §8.2.2: a request carrying them is malformed; they are left out, not sent
    build_h2_request("http://127.0.0.1/", "GET", [("Connection", "close"), ("Host", "x")], b"")


def test_h2_request_refuses_a_malformed_header_list() -> None:
    with pytest.raises(TypeError):
        H2Request("GET", "http", "a", "/", [("only-a-name",)])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        H2Request("GET", "http", "a", "/", [], "not bytes")  # type: ignore[arg-type]


def test_error_codes_are_named() -> None:
    assert error_name(0) == "NO_ERROR"
    assert error_name(7) == "REFUSED_STREAM"
    assert error_name(0xD) == "HTTP_1_1_REQUIRED"
    assert error_name(0x99) == "0x99"
