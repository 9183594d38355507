"""The certificate of the TLS stacks: made once per machine, kept in the data directory.

A stack that declares `tls = true` serves HTTPS with `{tls_cert}` and `{tls_key}`: a
self-signed certificate for `localhost`, `127.0.0.1` and `::1` (every stack binds
127.0.0.1), made by the `openssl` command line (Debian's openssl package; the
`cryptography` package is no dependency of stackrace, and a certificate is one command).
The engine trusts exactly this certificate for these stacks (`cacert`), so their
handshakes are verified like any other server's, and nothing is added to the system's
trust store.

    $XDG_DATA_HOME/stackrace/tls/       (STACKRACE_HOME/data/tls)   mode 0700
        cert.pem                        the certificate (public)
        key.pem                         its private key, mode 0600

ECDSA P-256 and SHA-256: what a current nginx or Caddy set-up serves, and the cheapest
handshake for the server (an RSA-2048 signature costs it ~10× more CPU); valid ten years.
Made under a lock (two stackrace processes starting at once make it once), written to
temporary files and renamed into place. Files found there are used only if they are
regular files (no symlinks) owned by this user, the key private, and the pair loads;
otherwise a fresh pair replaces them.
"""

from __future__ import annotations

import os
import shutil
import ssl
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from stackrace.base import madeby, paths
from stackrace.base.errors import StackraceError

DAYS = 3650
SUBJECT = "/CN=localhost/O=stackrace (self-signed, for loopback stacks)"
SAN = "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1"


class CertificateError(StackraceError, RuntimeError):
    """The certificate could not be made; the message says why and what to install."""


@dataclass(frozen=True)
class Certificate:
    cert: Path
    key: Path


def tls_dir() -> Path:
    return paths.data_dir() / "tls"


def _usable(cert: Path, key: Path) -> bool:
    uid = os.getuid()
    for p, private in ((cert, False), (key, True)):
        try:
            st = os.lstat(p)
        except OSError:
            return False
        if not stat.S_ISREG(st.st_mode) or st.st_uid != uid:
            return False
        if private and st.st_mode & 0o077:
            return False
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.load_cert_chain(str(cert), str(key))
    except (ssl.SSLError, OSError):
        return False
    return True


def ensure() -> Certificate:
    """The machine's certificate and key, made now if missing or unusable."""
    d = tls_dir()
    cert, key = d / "cert.pem", d / "key.pem"
    if _usable(cert, key):
        return Certificate(cert, key)
    openssl = shutil.which("openssl")
    if openssl is None:
        raise CertificateError(
            "a TLS stack needs a certificate, made with the openssl command: "
            "install it (apt-get install openssl)"
        )
    madeby.make_dir(d, "the TLS stacks' certificate", mode=0o700)
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise CertificateError(f"{d}: not a directory of this user's: refusing to write there")
    os.chmod(d, 0o700)
    with paths.locked(d / ".lock"):
        if _usable(cert, key):
            return Certificate(cert, key)  # made by another process meanwhile
        tmp_cert, tmp_key = d / f".cert.{os.getpid()}.pem", d / f".key.{os.getpid()}.pem"
        for p in (tmp_cert, tmp_key):
            p.unlink(missing_ok=True)
        old = os.umask(0o077)
        try:
            r = subprocess.run(
                [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                 "ec_paramgen_curve:prime256v1", "-sha256", "-nodes", "-days", str(DAYS),
                 "-subj", SUBJECT, "-addext", SAN,
                 "-keyout", str(tmp_key), "-out", str(tmp_cert)],
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=60,
            )  # fmt: skip
        finally:
            os.umask(old)
        if r.returncode != 0 or not _usable(tmp_cert, tmp_key):
            for p in (tmp_cert, tmp_key):
                p.unlink(missing_ok=True)
            why = (r.stderr.strip().splitlines() or ["no certificate made"])[-1]
            raise CertificateError(f"openssl could not make the TLS stacks' certificate: {why}")
        os.chmod(tmp_cert, 0o644)
        os.replace(tmp_key, key)
        os.replace(tmp_cert, cert)
    return Certificate(cert, key)
