"""Where the private instance lives and where the MariaDB binaries are."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from stackrace.db.errors import DbError

ENV_DIR = "STACKRACE_DB_DIR"
ENV_BINDIR = "STACKRACE_MARIADB_BINDIR"

# Debian puts mariadbd in /usr/sbin, which is not on a normal user's PATH.
_FALLBACK_BINDIRS = ("/usr/sbin", "/usr/local/sbin", "/usr/bin", "/usr/local/bin")

# sun_path is 108 bytes including the terminating NUL.
_MAX_SOCKET_PATH = 100


def default_dir() -> Path:
    """$STACKRACE_DB_DIR, else $XDG_CACHE_HOME/stackrace/mariadb, else ~/.cache/..."""
    if os.environ.get(ENV_DIR):
        return Path(os.environ[ENV_DIR]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "stackrace" / "mariadb"


@dataclass(frozen=True)
class InstancePaths:
    """The files of one private instance, all under `root` (the socket may not fit there)."""

    root: Path

    @property
    def datadir(self) -> Path:
        return self.root / "data"

    @property
    def pid_file(self) -> Path:
        return self.root / "mariadbd.pid"

    @property
    def log_file(self) -> Path:
        return self.root / "mariadbd.err"

    @property
    def meta_file(self) -> Path:
        return self.root / "instance.json"

    @property
    def socket(self) -> Path:
        """root/mariadbd.sock, or a short path under the temp dir when that is too long."""
        sock = self.root / "mariadbd.sock"
        if len(str(sock)) <= _MAX_SOCKET_PATH:
            return sock
        digest = hashlib.sha1(str(self.root).encode()).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / f"stackrace-mariadb-{digest}.sock"


def find_binary(name: str, bindir: str | None = None) -> Path:
    """Locate a MariaDB program: only in `bindir` (or $STACKRACE_MARIADB_BINDIR), a
    PATH-like list of directories, if set; else on PATH, then in Debian's sbin directories."""
    bindir = bindir or os.environ.get(ENV_BINDIR) or None
    if bindir is not None:
        found = shutil.which(name, path=bindir)
        where = bindir
    else:
        search = os.pathsep.join([os.environ.get("PATH", ""), *_FALLBACK_BINDIRS])
        found = shutil.which(name, path=search)
        where = "PATH or /usr/sbin"
    if found is None:
        raise DbError(
            f"{name} not found in {where}: install MariaDB (apt-get install mariadb-server "
            f"mariadb-client; scripts/setup.sh does it) or set {ENV_BINDIR}"
        )
    return Path(found)
