import pytest

from stackrace.engine.request import RequestError, build_request, parse_url


def test_default_request_is_a_plain_keep_alive_get():
    req = build_request("http://127.0.0.1:8080/hello?x=1")
    assert req == (
        b"GET /hello?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: stackrace\r\n"
        b"Accept: */*\r\n\r\n"
    )


def test_method_headers_and_body():
    req = build_request("http://localhost/x", "post", [("X-Token", "abc"), ("Host", "h")], b"{}")
    head, body = req.split(b"\r\n\r\n")
    assert head.startswith(b"POST /x HTTP/1.1\r\n")
    assert b"Host: h" in head and b"Host: localhost" not in head
    assert b"X-Token: abc" in head
    assert b"Content-Length: 2" in head
    assert body == b"{}"


def test_post_without_body_says_length_zero():
    assert b"Content-Length: 0" in build_request("http://localhost/", "POST")


@pytest.mark.parametrize(
    "url", ["https://127.0.0.1/", "ftp://x/", "http:///nohost", "http://127.0.0.1:99999/"]
)
def test_bad_urls_are_refused(url):
    with pytest.raises(RequestError):
        parse_url(url)


def test_header_injection_is_refused():
    with pytest.raises(RequestError):
        build_request("http://localhost/", headers=[("X", "a\r\nEvil: 1")])


def test_ipv6_host_header():
    assert parse_url("http://[::1]:8080/").host_header == "[::1]:8080"
