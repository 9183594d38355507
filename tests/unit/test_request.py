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
    "url",
    [
        "ftp://x/",
        "http:///nohost",
        "http://127.0.0.1:99999/",
        # a space, CR, LF or other characters not allowed in a request target: urlsplit
        # drops CR/LF/TAB silently, so these reached the request line unchecked
        "http://127.0.0.1:8080/hello world",
        "http://127.0.0.1:8080/hello\r\nX-Inj: 1",
        "http://127.0.0.1:8080/x\ty",
        "http://127.0.0.1:8080/a\x00b",
        'http://127.0.0.1:8080/say"hi"',
        "http://127.0.0.1:8080/<script>",
        "http://127.0.0.1:8080/caf\u00e9",
        "http://127.0.0.1:8080/%zz",
        "http://bad host/",
        "http://under_score/",
    ],
)
def test_bad_urls_are_refused(url):
    with pytest.raises(RequestError):
        parse_url(url)


def test_https_is_a_url_the_engine_loads():
    u = parse_url("https://localhost/hello")
    assert (u.tls, u.port, u.host_header) == (True, 443, "localhost")
    assert parse_url("https://127.0.0.1:8443/").host_header == "127.0.0.1:8443"


def test_a_legal_target_is_sent_as_written():
    target = "/a/b;c=d?x=1&y=%20z&k=(v)*'!$,+:@~"
    assert build_request(f"http://127.0.0.1:8080{target}#frag").startswith(
        f"GET {target} HTTP/1.1\r\n".encode()
    )


@pytest.mark.parametrize("method", ["GE T", "GET\r\n", "", "G(ET)", "GÉT"])
def test_a_method_is_a_token(method):
    with pytest.raises(RequestError, match="method"):
        build_request("http://localhost/", method)


@pytest.mark.parametrize(
    ("name", "value"),
    [("X Y", "1"), ("X:Y", "1"), ("", "1"), ("X", "a\nb"), ("X", "a\x00b"), ("Ü", "1")],
)
def test_header_names_and_values_are_checked(name, value):
    with pytest.raises(RequestError, match="header"):
        build_request("http://localhost/", headers=[(name, value)])


def test_header_injection_is_refused():
    with pytest.raises(RequestError):
        build_request("http://localhost/", headers=[("X", "a\r\nEvil: 1")])


def test_ipv6_host_header():
    assert parse_url("http://[::1]:8080/").host_header == "[::1]:8080"
