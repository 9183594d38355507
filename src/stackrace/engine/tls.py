"""The engine's TLS client contexts, built once per target.

The settings are decided here, once, for both transports: the C transport's
`TlsContext` (engine/_tls.h: OpenSSL driven from engine/_cycle.c, what every https
connection uses) and Python's `ssl.SSLContext` for the reference transport
(transport.TlsTransport over memory BIOs: `STACKRACE_PY_TRANSPORT=1`, and slow clients,
whose pacing is Python's). Both time the TCP connect, the handshake and the first byte
apart and decide themselves whether to offer a session for resumption, and both link the
same libssl. Verification is on by default with the system's CAs, as curl does;
`cacert` trusts one PEM file instead (a self-signed server: the certificate stackrace
makes for its TLS stacks, see stackrace.stacks.certificate), and `verify=False` is
curl's `-k` (encrypted, nobody's identity checked).

ALPN offers `http/1.1` to an HTTP/1.1 target, so a server that would pick h2 does not,
and only `h2` to an HTTP/2 one (`http2`): a server that cannot speak it fails the
handshake's check in one line (engine/_cycle.c) rather than being loaded in HTTP/1.1
under an h2 label.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from stackrace.base.errors import StackraceError
from stackrace.engine._cycle import TlsContext

# what both contexts ask of the server
MIN_VERSION = ssl.TLSVersion.TLSv1_2
ALPN = ("http/1.1",)
ALPN_H2 = ("h2",)


class TlsConfigError(StackraceError, ValueError):
    """A CA file that cannot be used; the message names the file."""


def client_context(verify: bool = True, cacert: str | None = None) -> ssl.SSLContext:
    """A client context: TLS 1.2 or later, ALPN http/1.1, verification as asked."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = MIN_VERSION
    ctx.set_alpn_protocols(list(ALPN))
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


def c_context(
    host: str,
    verify: bool = True,
    cacert: str | None = None,
    resume: bool = False,
    max_version: ssl.TLSVersion | None = None,
    http2: bool = False,
) -> TlsContext:
    """The C transport's context: client_context's settings, for connections to `host`
    (its SNI, and the name checked when verifying). `resume`: keep the newest session the
    server gives and offer it to the next connection (--tls-resume); without it every
    connection is a full handshake. `max_version`: a cap, for benchmarks only. `http2`:
    ALPN offers h2 alone."""
    if cacert is not None:
        check_cacert(cacert)
    alpn = b"".join(bytes([len(p)]) + p.encode() for p in (ALPN_H2 if http2 else ALPN))
    # (ALPN's wire format: each name after its length)
    return TlsContext(
        verify=verify,
        cafile=cacert,
        host=host,
        resume=resume,
        min_version=MIN_VERSION.value,
        alpn=alpn,
        max_version=max_version.value if max_version is not None else 0,
    )


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
