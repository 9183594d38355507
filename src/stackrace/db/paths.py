"""Where the private instance lives and where the MariaDB binaries are."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from stackrace.base import paths
from stackrace.db.errors import DbError

ENV_DIR = "STACKRACE_DB_DIR"
ENV_BINDIR = "STACKRACE_MARIADB_BINDIR"

# Debian puts mariadbd in /usr/sbin, which is not on a normal user's PATH.
_FALLBACK_BINDIRS = ("/usr/sbin", "/usr/local/sbin", "/usr/bin", "/usr/local/bin")

# sun_path is 108 bytes including the terminating NUL.
_MAX_SOCKET_PATH = 100


def default_dir() -> Path:
    """$STACKRACE_DB_DIR, else mariadb/ in the cache directory (stackrace.base.paths:
    ~/.cache/stackrace/mariadb)."""
    if os.environ.get(ENV_DIR):
        return Path(os.environ[ENV_DIR]).expanduser()
    return paths.cache_dir() / "mariadb"


@dataclass(frozen=True)
class InstancePaths:
    """The files of one private instance.

    `root` (the instance's directory, private to stackrace's user) holds instance.json
    (passwords, mode 0600), up.lock and install.log. The server's own files — data/,
    files/ (secure_file_priv), socket, pid file, error log — are in `server`, a directory
    owned by the account mariadbd runs as (see `stackrace.db.server_user`): root/server
    when that account can reach it, else a private directory made with mkdtemp under
    /var/tmp, whose path instance.json records.

    `server=root` describes the layout of instances made before that split (data/ and
    the rest directly under root), so they can be found, stopped and retired.
    """

    root: Path
    server: Path | None = None

    @property
    def server_dir(self) -> Path:
        return self.server if self.server is not None else self.root / "server"

    @property
    def datadir(self) -> Path:
        return self.server_dir / "data"

    @property
    def files_dir(self) -> Path:
        """secure_file_priv: the only directory the server reads or writes files in."""
        return self.server_dir / "files"

    @property
    def tmp_dir(self) -> Path:
        """The server's own temporary directory: two instances installing at once in the
        shared /tmp collided on their temporary tables ("Unknown table
        'mysql.tmp_user_sys'", 2 of 12 concurrent installs on a busy 2-core machine)."""
        return self.server_dir / "tmp"

    @property
    def pid_file(self) -> Path:
        return self.server_dir / "mariadbd.pid"

    @property
    def log_file(self) -> Path:
        return self.server_dir / "mariadbd.err"

    @property
    def meta_file(self) -> Path:
        return self.root / "instance.json"

    @property
    def install_log(self) -> Path:
        return self.root / "install.log"

    @property
    def socket(self) -> Path:
        """server_dir/mariadbd.sock, or (legacy instances only: new server dirs are chosen
        short enough) a short path under the temp dir when that is too long."""
        sock = self.server_dir / "mariadbd.sock"
        if len(str(sock)) <= _MAX_SOCKET_PATH:
            return sock
        digest = hashlib.sha1(str(self.root).encode()).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / f"stackrace-mariadb-{digest}.sock"

    def socket_fits(self, server_dir: Path) -> bool:
        return len(str(server_dir / "mariadbd.sock")) <= _MAX_SOCKET_PATH


def shadow_base() -> Path:
    """Where server directories go when the instance's own is out of the server's reach:
    /var/tmp (kept across reboots, unlike /tmp on many systems), else the temp dir."""
    var_tmp = Path("/var/tmp")
    if var_tmp.is_dir() and os.access(var_tmp, os.W_OK | os.X_OK):
        return var_tmp
    return Path(tempfile.gettempdir())


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
