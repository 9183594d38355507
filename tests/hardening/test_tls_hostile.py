"""A TLS server that misbehaves costs the engine nothing but what it counts: each
misbehaviour ends as one failure kind per request, on both transports (the C one, which
drives OpenSSL itself, and the Python one, the reference), and every request sent is
answered, failed or still waiting.

The server is bench/tls_hostile_server.c (built here with cc and libssl-dev, both in
scripts/apt-base.txt): one misbehaviour per run. bench/tls_hostile.py runs the same
server against the engine in-process, under AddressSanitizer too, and checks that no
connection's TLS state is left behind; this test checks what a user sees, with the
real `stackrace load`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import CLI, ROOT, free_port

pytestmark = pytest.mark.slow


# mode: (the failure kinds of a connection per request, words of the tls reason or None)
MODES = {
    "plain": ({"tls"}, "version"),  # plain HTTP answers the ClientHello
    "silent": ({"tls"}, "handshake timed out"),  # takes the connection, says nothing
    "junk": ({"tls"}, None),  # records of the right shape, random content
    "oversize": ({"reset"}, None),  # a record longer than TLS allows, after the handshake
    "truncate": ({"reset"}, None),  # half an answer, no close_notify
    "notify": ({"reset"}, None),  # close_notify instead of an answer
    "flood": ({"timeout"}, None),  # an answer of endless length
    "keyupdate": (set(), None),  # 50 key updates before each answer (TLS 1.3)
    "renegotiate": (set(), None),  # asks for a renegotiation before each answer (TLS 1.2)
}


@pytest.fixture(scope="module")
def hostile_server(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hostile") / "tls_hostile_server"
    src = ROOT / "bench" / "tls_hostile_server.c"
    subprocess.run(["cc", "-O2", "-o", str(out), str(src), "-lssl", "-lcrypto"], check=True)
    return out


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("hostile-cert")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "2", "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


def serve(binary: Path, cert: tuple[Path, Path], mode: str) -> Iterator[int]:
    port = free_port()
    proc = subprocess.Popen(
        [str(binary), str(port), str(cert[0]), str(cert[1]), mode],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        yield port
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the server and its children, one a connection
        proc.wait()


def load(port: int, python: bool, keepalive: bool) -> dict:
    env = {**os.environ, "STACKRACE_PY_TRANSPORT": "1" if python else "0"}
    argv = [*CLI, "load", f"https://127.0.0.1:{port}/hello", "-k", "-c", "4", "-d", "1.5s",
            "--timeout", "0.5s", "--connect-timeout", "0.5s", "--json", "--no-progress",
            *([] if keepalive else ["--no-keepalive"])]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert "Traceback" not in out.stderr, out.stderr
    assert out.stdout, out.stderr
    return json.loads(out.stdout.splitlines()[0])


@pytest.mark.parametrize("mode", list(MODES))
def test_a_misbehaving_tls_server_is_counted_on_both_transports(
    hostile_server: Path, cert: tuple[Path, Path], mode: str
) -> None:
    kinds, words = MODES[mode]
    for port in serve(hostile_server, cert, mode):
        for python in (False, True):
            doc = load(port, python, keepalive=False)
            a, total = doc["accounting"], doc["total"]
            assert a["sent"] == a["answered"] + a["failed_no_answer"] + a["waiting"], (python, a)
            assert a["sent"] > 0, (python, a)
            assert set(total["failures"]) == kinds, (python, mode, total["failures"], doc["errors"])
            if kinds:
                assert total["requests"] == 0, (python, total)
            else:
                assert total["requests"] > 0, (python, total)
            if words is not None:
                reasons = [r.lower().replace("_", " ") for r in total["errors"]]
                assert any(words in r for r in reasons), (python, total["errors"])


def test_renegotiation_is_refused_on_the_c_transport(
    hostile_server: Path, cert: tuple[Path, Path]
) -> None:
    """Kept alive, a server asks for a renegotiation before every answer: the C transport
    refuses it (OpenSSL's no_renegotiation alert: a handshake in the middle of a
    measurement, which a server could repeat to spend the engine's CPU), so this
    server answers once per connection and then drops it; each drop is a `reset`
    failure of the request then in flight. Counted, never hidden."""
    for port in serve(hostile_server, cert, "renegotiate"):
        doc = load(port, False, keepalive=True)
        a, total = doc["accounting"], doc["total"]
        assert a["sent"] == a["answered"] + a["failed_no_answer"] + a["waiting"], a
        assert total["requests"] > 0 and set(total["failures"]) <= {"reset"}, total
        # one answer per connection: a handshake for every answer
        assert total["handshakes"] >= total["requests"], total
