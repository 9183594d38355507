"""The engine's TLS client context: what it trusts, and what `-k` leaves out."""

from __future__ import annotations

import ssl

from stackrace.engine.tls import client_context


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
