"""HTTPS on the C transport (engine/_cycle.c driving OpenSSL) counts every response shape
as the Python one (engine/transport.py TlsTransport, the reference) does.

The test server serves HTTPS with a certificate made here (tests/servers/testserver.py
--tls), verified by the engine (`--cacert`, the name checked: 127.0.0.1 is in it). Each
test loads it with the real CLI, once on each transport (STACKRACE_PY_TRANSPORT=1: the
Python one), and checks the same accounting as tests/integration/test_c_transport.py:
every request sent is answered, failed by the same kinds, or still waiting; the server
saw every request counted as sent; each new connection is one handshake, timed apart;
nothing is left open. Then what goes wrong before an answer: a handshake that stalls
(counted as connecting, in the handshake, and failed as `tls`, "handshake timed out",
not as a connect timeout), and handshakes that fail (a certificate for another name, one
nobody vouches for, a server that does not speak TLS): `tls` failures with OpenSSL's
reason."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import CLI, ROOT, TlsTestServer, free_port, never_accepting_listener, wait_for
from tests.integration.test_c_transport import ALONE, KEPT, SHAPES, balanced, check_mix

pytestmark = pytest.mark.slow


def make_cert(directory: Path, name: str, san: str) -> tuple[Path, Path]:
    """A self-signed ECDSA certificate and its key, for `san` (openssl's -addext form)."""
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-sha256", "-nodes", "-days", "2", "-subj", f"/CN={name}", "-addext", san,
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    d = tmp_path_factory.mktemp("tls-certs")
    return {
        # what the TLS stacks serve: loopback's names and addresses
        "loopback": make_cert(d, "loopback", "subjectAltName=DNS:localhost,IP:127.0.0.1"),
        # another server's: valid, trusted when given, but not for 127.0.0.1
        "elsewhere": make_cert(d, "elsewhere", "subjectAltName=DNS:elsewhere.test"),
    }


@pytest.fixture(params=["1.3", "1.2"], ids=["tls1.3", "tls1.2"])
def tls_server(request: pytest.FixtureRequest, certs) -> Iterator[TlsTestServer]:
    cert, key = certs["loopback"]
    s = TlsTestServer(cert, key, request.param)
    yield s
    s.kill()


@pytest.fixture(scope="module")
def tls13_server(certs) -> Iterator[TlsTestServer]:
    """One for the module: each load resets its counters first, and each test checks
    that its own connections are closed before the next starts."""
    cert, key = certs["loopback"]
    s = TlsTestServer(cert, key, "1.3")
    yield s
    s.kill()


def load(url: str, python: bool, *extra: str, keepalive: bool = False, d: str = "0.5s") -> dict:
    """`load URL` for `d` at c=4 on one transport; the JSON's total, its errors
    (why the `tls` failures failed) and the accounting's handshaking count beside it."""
    env = {**os.environ, "STACKRACE_PY_TRANSPORT": "1" if python else "0"}
    argv = [*CLI, "load", url, *([] if keepalive else ["--no-keepalive"])]
    argv += ["-c", "4", "-d", d, "--json", "--no-progress", *extra]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert out.stdout, out.stderr
    doc = json.loads(out.stdout.splitlines()[0])
    total = doc["total"]
    total["accounting"] = doc["accounting"]
    return total


def handshake_each(python: bool, w: dict) -> None:
    """A connection per request: a full handshake each, the connect and the handshake
    timed apart, the first byte timed per request."""
    assert w["handshakes"] >= w["requests"] and w["resumed"] == 0, (python, w)
    assert w["tls"]["count"] == w["connect"]["count"] == w["handshakes"], (python, w)
    assert w["tls"]["p50"] > 0 and w["first_byte"]["count"] >= w["requests"], (python, w)


def check_shape(server: TlsTestServer, cacert: str, path: str, kinds: set[str], answered: bool):
    """`path` loaded with a connection per request on each transport: counted alike."""
    seen = {}
    for python in (False, True):
        server.reset()
        w = load(server.url(path), python, "--cacert", cacert)
        assert balanced(w), (python, w)
        assert set(w["failures"]) == kinds, (python, w["failures"], w["errors"])
        if answered:
            assert w["requests"] > 20 and w["requests"] == w["sent"] - w["waiting"], w
        stats = server.stats()
        assert stats["by_path"].get(path.split("?")[0], 0) >= w["requests"]
        assert stats["accepted"] >= w["sent"] - w["waiting"]
        handshake_each(python, w)
        seen[python] = w
    assert server.clients() == 0  # nothing left open
    if path == "/twice":
        assert seen[False]["unsolicited"] > 0 and seen[True]["unsolicited"] > 0


def test_answered_shapes_are_counted_alike_over_tls_on_both_transports(
    tls13_server: TlsTestServer, certs
) -> None:
    """The answered shapes as one mix (test_c_transport.py's MIXED: a connection per
    request, so each shape is read as it is alone, and counted apart); a second of it:
    TLS handshakes make each connection dear, and each shape is still to be answered
    more than 20 times, as when each had its own half second."""
    check_mix(tls13_server, "--cacert", str(certs["loopback"][0]), least=20, d="1s",
              each=handshake_each)  # fmt: skip


@pytest.mark.parametrize(("path", "kinds", "answered"), ALONE, ids=[s[0] for s in ALONE])
def test_each_response_shape_is_counted_alike_over_tls_on_both_transports(
    tls13_server: TlsTestServer, certs, path: str, kinds: set[str], answered: bool
) -> None:
    check_shape(tls13_server, str(certs["loopback"][0]), path, kinds, answered)


def test_response_shapes_over_tls_1_2_are_counted_alike(certs) -> None:
    """TLS 1.2 (a server that speaks no later one): the shapes whose reads differ most,
    one read, chunks, many reads, a close-delimited body (as one mix, as above), a
    truncated one."""
    cert, key = certs["loopback"]
    server = TlsTestServer(cert, key, "1.2")
    try:
        check_mix(server, "--cacert", str(cert), least=20, d="1s", each=handshake_each,
                  paths=["/hello", "/chunked", "/big?kb=256", "/http10"])  # fmt: skip
        for path, kinds, answered in SHAPES:
            if path == "/midbody":
                check_shape(server, str(cert), path, kinds, answered)
    finally:
        server.kill()


@pytest.mark.parametrize(("path", "kinds"), [*KEPT, ("/close", set()), ("/twice", {"protocol"})],
                         ids=[*(k[0] for k in KEPT), "/close", "/twice"])  # fmt: skip
def test_kept_alive_answers_over_tls_are_counted_alike_framed_or_parsed(
    tls13_server: TlsTestServer, certs, path: str, kinds: set[str]
) -> None:
    """Kept alive: /hello and the 503 are framed on the C transport (one whole answer in
    one read's records), the rest parsed there (a TLS connection is never handed over);
    /close is answered `Connection: close` and recycled; /twice's second response comes
    in the same read, unasked: the request fails (`protocol`), on both transports."""
    cacert = str(certs["loopback"][0])
    seen = {}
    for python in (False, True):
        tls13_server.reset()
        # kept alive, a quarter second brings hundreds of answers (more than 20 even on a
        # busy machine); a connection per answer (/close, /twice) and 256 KiB answers
        # have their half second (/big: 24 sent in a quarter, at a load average of 17)
        d = "0.5s" if path in ("/close", "/twice", "/big?kb=256") else "0.25s"
        w = load(tls13_server.url(path), python, "--cacert", cacert, keepalive=True, d=d)
        assert balanced(w), (python, w)
        stats = tls13_server.stats()
        assert stats["by_path"].get(path.split("?")[0], 0) >= w["requests"] > 20, (python, w)
        if path == "/close":
            assert stats["accepted"] >= w["requests"] and w["handshakes"] >= w["requests"]
        elif path != "/twice":
            # the four connections, kept: four handshakes, a first byte for each answer
            assert stats["accepted"] == 4 and w["handshakes"] == 4, (python, stats, w)
            assert w["first_byte"]["count"] >= w["requests"], (python, w)
        seen[python] = w
    for python, w in seen.items():
        # the unasked response fails the request in flight; which comes first (the
        # unasked one, or the connection's next answer) is the server's timing
        assert set(w["failures"]) <= kinds | {"protocol"} and kinds <= set(w["failures"]), (
            python,
            w["failures"],
        )
    assert tls13_server.clients() == 0


def test_sessions_resume_over_both_versions_on_both_transports(tls_server, certs) -> None:
    """--tls-resume: after the first connections, the session the server gave (TLS 1.3:
    its tickets; TLS 1.2: at the handshake) is offered and resumed."""
    cacert = str(certs["loopback"][0])
    for python in (False, True):
        w = load(tls_server.url("/hello"), python, "--cacert", cacert, "--tls-resume")
        assert balanced(w) and w["requests"] > 20, (python, w)
        # all but the first few (the four slots' first connections, full)
        assert w["resumed"] >= 0.8 * w["handshakes"], (python, w["resumed"], w["handshakes"])


@pytest.fixture(scope="module")
def go_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bench/target (Go's net/http and crypto/tls), built once here; skipped without Go."""
    go = shutil.which("go") or next(
        (p for p in ("/usr/local/go/bin/go", str(Path.home() / "go/bin/go")) if Path(p).exists()),
        None,
    )
    if go is None:
        pytest.skip("no Go toolchain (the Go stacks' install brings one)")
    out = tmp_path_factory.mktemp("go-target") / "target"
    subprocess.run([go, "build", "-o", str(out), "."], cwd=ROOT / "bench" / "target",
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    return out


@pytest.mark.parametrize("version", ["tls12", "tls13"])
def test_sessions_resume_against_a_server_that_renews_its_ticket_each_time(
    go_target: Path, certs, version: str
) -> None:
    """Go's TLS server sends a fresh ticket with every resumed TLS 1.2 handshake:
    OpenSSL then replaces the connection's session with a copy holding it, marks the
    resumed one unusable, and tells no callback. Keeping only the callback's sessions
    resumed every other connection (51 %); the C transport keeps each connection's own
    at its end too, as the Python transport does (`keep_session`)."""
    cert, key = certs["loopback"]
    port = free_port()
    proc = subprocess.Popen(
        [str(go_target), str(port), str(cert), str(key), "tickets",
         *(["tls12"] if version == "tls12" else [])],
        stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert wait_for(lambda: _listening(port), 10.0)
        for python in (False, True):
            w = load(f"https://127.0.0.1:{port}/hello", python, "--cacert", str(cert),
                     "--tls-resume")  # fmt: skip
            assert balanced(w) and w["requests"] > 20, (python, w)
            assert w["resumed"] >= 0.8 * w["handshakes"], (python, w["resumed"], w["handshakes"])
    finally:
        proc.kill()
        proc.wait()


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def listener(serve) -> Iterator[int]:
    """A loopback listener whose every accepted connection is given to `serve(conn)` in a
    thread of its own (kept until the listener closes); yields its port."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = lsock.accept()
            except OSError:
                return
            held.append(conn)
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        yield lsock.getsockname()[1]
    finally:
        stop.set()
        lsock.close()
        for conn in held:
            with contextlib.suppress(OSError):
                conn.close()


def test_a_stalled_handshake_is_handshaking_and_fails_as_tls_on_both_transports() -> None:
    """A server that takes the connection and never answers the ClientHello: the
    requests wait `connecting` (nothing written) and `handshaking` (TCP is up), and the
    connect timeout ends each as a `tls` failure, "handshake timed out" — not a
    `connect_timeout`, which says the TCP connect itself never completed."""
    with listener(lambda conn: None) as port:
        for python in (False, True):
            w = load(f"https://127.0.0.1:{port}/", python, "-k", "-d", "2.5s",
                     "--connect-timeout", "0.7s")  # fmt: skip
            assert balanced(w), (python, w)
            assert w["requests"] == 0 and set(w["failures"]) == {"tls"}, (python, w)
            assert w["failures"]["tls"] >= 4, (python, w)  # each of the 4 slots timed out
            assert w["errors"] == {"handshake timed out": w["failures"]["tls"]}, (python, w)
            # the slots' next handshakes were under way at the stop
            acc = w["accounting"]
            assert acc["waiting"] == acc["connecting"] == acc["handshaking"] == 4, (python, acc)


def test_a_connect_that_never_completes_is_still_a_connect_timeout() -> None:
    """A listener that never accepts, its backlog of one full: the kernel completes the
    TCP handshake of one or two clients (their TLS then waits for a server that never
    reads: `tls`, "handshake timed out") and drops every other SYN — those never
    connect, and stay `connect_timeout` over https too."""
    with never_accepting_listener() as port:
        w = load(f"https://127.0.0.1:{port}/", False, "-k", "-c", "12", "-d", "2.5s",
                 "--connect-timeout", "0.7s")  # fmt: skip
    assert balanced(w), w
    assert w["requests"] == 0 and w["failures"].get("connect_timeout", 0) >= 10, w
    assert set(w["errors"]) <= {"handshake timed out"}, w["errors"]
    assert w["failures"].get("tls", 0) == w["errors"].get("handshake timed out", 0), w
    assert w["accounting"]["handshaking"] < w["accounting"]["connecting"], w["accounting"]


def test_failed_handshakes_are_tls_failures_with_the_reason_on_both_transports(certs) -> None:
    """A certificate for another name (trusted, so only the name fails), one nobody
    vouches for, a server that answers the ClientHello with plain HTTP: each connection
    fails as `tls`, with OpenSSL's reason."""
    loopback, elsewhere = certs["loopback"], certs["elsewhere"]
    other_name = TlsTestServer(*elsewhere)
    untrusted = TlsTestServer(*loopback)

    def plain_http(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            conn.recv(4096)
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            conn.close()

    try:
        with listener(plain_http) as plain_port:
            cases = [
                # (url, --cacert, what the reason says)
                (other_name.url("/hello"), elsewhere[0], "mismatch"),
                (untrusted.url("/hello"), elsewhere[0], "certificate:"),
                (f"https://127.0.0.1:{plain_port}/", loopback[0], "version"),
            ]
            for url, cacert, words in cases:
                for python in (False, True):
                    # only kinds and reasons are checked: a quarter second fails dozens
                    w = load(url, python, "--cacert", str(cacert), d="0.25s")
                    assert balanced(w), (python, w)
                    assert w["requests"] == 0 and set(w["failures"]) == {"tls"}, (python, w)
                    # OpenSSL's reason: Python's ssl spells it as a mnemonic
                    reasons = [r.lower().replace("_", " ") for r in w["errors"]]
                    assert any(words in r for r in reasons), (python, url, w["errors"])
                    if words != "version":
                        assert all(r.startswith("certificate:") for r in reasons), w["errors"]
    finally:
        other_name.kill()
        untrusted.kill()
