"""The engine's TLS client contexts: what they trust, and what `-k` leaves out; the C
transport's is made from the same settings as Python's."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from stackrace.engine import _cycle
from stackrace.engine.model import EngineSettings, TargetSpec
from stackrace.engine.target import Target
from stackrace.engine.tls import MIN_VERSION, TlsConfigError, c_context, client_context


def test_insecure_loads_no_ca_store():
    """`-k` checks nothing, so it loads no CAs: OpenSSL builds the server's chain against
    whatever store the context has even when told not to verify, and the system's CAs
    cost 300-450 µs of CPU per handshake (docs/engine.md, HTTPS)."""
    ctx = client_context(verify=False)
    assert ctx.verify_mode == ssl.CERT_NONE and not ctx.check_hostname
    assert ctx.cert_store_stats()["x509"] == 0


def test_verified_by_default_with_the_systems_cas():
    ctx = client_context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    assert ctx.cert_store_stats()["x509_ca"] > 0  # Debian's ca-certificates


def test_the_c_context_checks_a_ca_file_as_the_python_one(tmp_path: Path):
    bad = tmp_path / "not-a-cert.pem"
    bad.write_text("hello\n")
    for cafile, words in ((bad, "not a PEM"), (tmp_path / "none.pem", "no such file")):
        with pytest.raises(TlsConfigError, match=words):
            c_context("127.0.0.1", cacert=str(cafile))
    # both the unverified and the verified one are made, neither holds a session yet
    assert not c_context("127.0.0.1", verify=False).has_session
    assert not c_context("localhost", resume=True).has_session


def test_the_c_context_refuses_a_version_openssl_does_not_know():
    assert ssl.TLSVersion.TLSv1_2 == MIN_VERSION  # the floor of both contexts
    with pytest.raises(ValueError, match="TLS version"):
        _cycle.TlsContext(False, None, "127.0.0.1", False, 0x1234, b"\x08http/1.1")
    with pytest.raises(ValueError, match="TLS version"):
        c_context("127.0.0.1", verify=False, max_version=ssl.TLSVersion.MINIMUM_SUPPORTED)


def test_an_https_target_runs_on_the_c_transport_framed_and_recycled():
    """What the target decides for https (no connection made): the C transport's
    context, the request sent with the handshake's last flight (`presend`, so a
    connection per request is recycled), kept-alive answers framed."""
    loop = asyncio.new_event_loop()
    try:
        for keepalive in (True, False):
            spec = TargetSpec(id="t", url="https://127.0.0.1:9/", keepalive=keepalive,
                              tls_verify=False)  # fmt: skip
            t = Target(spec, EngineSettings(), loop)
            assert t.tls_c is not None and t.presend and t.timed
            assert t.frames == keepalive
    finally:
        loop.close()
