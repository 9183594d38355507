"""The engine's TLS client context, built once per target.

Python's `ssl` module (OpenSSL) over memory BIOs (transport.TlsTransport), so the engine
times the TCP connect, the handshake and the first byte apart and decides itself whether
to offer a session for resumption. Verification is on by default with the system's CAs,
as curl does; `cacert` trusts one PEM file instead (a self-signed server: the
certificate stackrace makes for its TLS stacks, see stackrace.stacks.certificate), and
`verify=False` is curl's `-k` (encrypted, nobody's identity checked).

HTTP/1.1 only: ALPN offers `http/1.1`, so a server that would pick h2 does not.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from stackrace.base.errors import StackraceError


class TlsConfigError(StackraceError, ValueError):
    """A CA file that cannot be used; the message names the file."""


def client_context(verify: bool = True, cacert: str | None = None) -> ssl.SSLContext:
    """A client context: TLS 1.2 or later, ALPN http/1.1, verification as asked."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_alpn_protocols(["http/1.1"])
    if cacert is not None:
        check_cacert(cacert)
        ctx.load_verify_locations(cafile=cacert)
    elif verify:
        # Only when something is checked: OpenSSL builds the server's chain against the
        # store even when told not to verify, and with the system's ~140 CAs that cost
        # 300-450 µs of CPU per handshake (measured with `load --no-keepalive -k`,
        # 2026-11-27: 1.36-1.51 ms per handshake with the store, 1.05 without).
        ctx.load_default_certs()
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def check_cacert(path: str) -> None:
    """TlsConfigError unless `path` is a readable file of PEM certificates."""
    p = Path(path)
    if not p.is_file():
        raise TlsConfigError(f"--cacert {path}: no such file")
    try:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(cafile=str(p))
    except (ssl.SSLError, OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
        raise TlsConfigError(f"--cacert {path}: not a PEM certificate file ({why})") from None
    if not ctx.cert_store_stats().get("x509", 0):
        raise TlsConfigError(f"--cacert {path}: holds no certificate")
