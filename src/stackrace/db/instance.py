"""The private MariaDB's files: its record, its server directory, and making a new one.

An instance lives under its root (default: the user's cache dir, stackrace.db.paths):
`instance.json` (`InstanceMeta`: the port and the passwords, mode 0600) says where the
server's files are and which account runs it; the server directory holds the data, the
socket and the one directory the server may read or write files in. Installing a new
instance (`install`) makes that directory for the server's account (under the root, or
a fresh private one under /var/tmp when a socket path would not fit), runs
`mariadb-install-db`, and provisions it offline (`mariadbd --bootstrap`,
stackrace.db.provision) before its first start ever opens the TCP port.

An instance made by the first build (layout 1, whose first start listened with a
passwordless root) cannot be trusted: `retire_old_layout` stops its server and deletes
it. Nothing else here starts or stops a server: stackrace.db.managed does, over these
files.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
from pathlib import Path

import msgspec

from stackrace.base import madeby
from stackrace.db import provision, server_user
from stackrace.db.errors import DbError
from stackrace.db.paths import InstancePaths, find_binary, shadow_base
from stackrace.db.proc import is_our_server, read_pid, wait_gone
from stackrace.db.server_user import ServerUser

MADE_FOR = "the private MariaDB (data, passwords, logs)"  # its directory's marker (madeby)

DB_NAME = "stackrace"
DB_USER = "stackrace"

# 2: server files in a directory of the server account's, provisioned before the first
# start. 1 (instance.json without `layout`): made by the first build, whose first start
# listened on TCP with a passwordless root; such an instance is deleted and made again.
LAYOUT = 2


class InstanceMeta(msgspec.Struct, kw_only=True):
    """instance.json: what later commands need to find and log in to the instance."""

    port: int
    password: str  # the `stackrace` user's
    admin_password: str  # root's, set during provisioning
    provisioned: bool = False  # bootstrap provisioning finished: the server may start
    layout: int = 1
    server_dir: str = ""  # where the server's files are (see InstancePaths)
    run_as: str = ""  # mariadbd's --user ("" when stackrace is not root)


def lock_for_up(root: Path) -> tuple[int, bool]:
    """An exclusive flock on root/up.lock, and whether it had to wait for it: two `up`s
    at once (say bench and the user) would otherwise both install or both start a
    server on the same data directory. The descriptor holds the lock until closed."""
    madeby.make_dir(root, MADE_FOR)
    fd = os.open(root / "up.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        waited = False
    except BlockingIOError:  # another `up` is installing or starting it: wait for it
        waited = True
        fcntl.flock(fd, fcntl.LOCK_EX)
    return fd, waited


def read_meta(root: Path) -> InstanceMeta | None:
    """The instance's record (None: no instance here); DbError when it is damaged."""
    meta_file = InstancePaths(root).meta_file
    try:
        return msgspec.json.decode(meta_file.read_bytes(), type=InstanceMeta)
    except FileNotFoundError:
        return None
    except msgspec.DecodeError as exc:
        raise DbError(f"{meta_file} is damaged ({exc}); `stackrace db reset --wipe`") from None


def write_meta(root: Path, meta: InstanceMeta) -> None:
    meta_file = InstancePaths(root).meta_file
    tmp = meta_file.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # holds passwords
    with os.fdopen(fd, "wb") as f:
        f.write(msgspec.json.format(msgspec.json.encode(meta)))
    os.replace(tmp, meta_file)


def instance_paths(root: Path) -> InstancePaths:
    """Where the files are, from instance.json (another process may have made it)."""
    try:
        meta = read_meta(root)
    except DbError:
        meta = None
    if meta is None:
        return InstancePaths(root)
    if meta.layout < LAYOUT:
        return InstancePaths(root, server=root)  # the first build's layout
    return InstancePaths(root, server=Path(meta.server_dir) if meta.server_dir else None)


def server_user_of(meta: InstanceMeta, strict: bool = True) -> ServerUser:
    """The account the instance was made to run as; DbError when it no longer exists
    (`strict=False`: a stand-in that names it, for a status)."""
    try:
        return server_user.recorded(meta.run_as)
    except LookupError:
        if not strict:
            return ServerUser(name=meta.run_as, uid=-1, gid=-1, groups=frozenset())
        raise DbError(
            f"the private MariaDB was made to run as '{meta.run_as}', which no longer "
            "exists: `stackrace db reset --wipe` makes a new instance"
        ) from None


def install(
    root: Path, port: int, run_as: str, mariadbd: Path, bindir: str | None
) -> tuple[InstanceMeta, str]:
    """A fresh server directory, mariadb-install-db, then provisioning in bootstrap; the
    record, and what the user should know of the account it runs as ("" if nothing).

    What a half-made instance left (a crash, a failed install) is removed first. The
    passwords are in instance.json before the server directory exists, so a crash at
    any point leaves a record the next `up` can clean up from.
    """
    user = server_user.choose(run_as)
    old = read_meta(root)
    if old is not None and old.server_dir:
        remove_server_dir(root, Path(old.server_dir))
    madeby.make_dir(root, MADE_FOR)
    # others may only pass through (to root/server, if that is the server's directory)
    os.chmod(root, 0o700 if user.uid == os.geteuid() else 0o711)
    server_dir = make_server_dir(root, user)
    meta = InstanceMeta(
        port=port,
        password=secrets.token_urlsafe(18),
        admin_password=secrets.token_urlsafe(18),
        layout=LAYOUT,
        server_dir=str(server_dir),
        run_as=user.name,
    )
    write_meta(root, meta)
    paths = InstancePaths(root, server=server_dir)
    for d in (paths.datadir, paths.files_dir, paths.tmp_dir):
        d.mkdir()
        user.own(d, 0o700)
    install_db = find_binary("mariadb-install-db", bindir)
    log = paths.install_log
    with contextlib.suppress(FileNotFoundError):
        log.unlink()
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    cmd = [
        str(install_db),
        "--no-defaults",  # must come first: ignore /etc/mysql and ~/.my.cnf
        f"--datadir={paths.datadir}",
        f"--tmpdir={paths.tmp_dir}",
        "--auth-root-authentication-method=normal",  # else root over TCP gets ERROR 1698
        "--skip-test-db",
        *user.user_arg,
    ]
    with os.fdopen(fd, "wb") as out:
        rc = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        ).returncode
    if rc != 0:
        raise DbError(
            f"mariadb-install-db failed (exit {rc}) in {paths.datadir}",
            log_tail=log_tail(log),
        )
    provision.bootstrap(
        mariadbd,
        paths.datadir,
        user,
        provision.bootstrap_sql(DB_NAME, DB_USER, meta.password, meta.admin_password),
        log,
        tmp_dir=paths.tmp_dir,
    )
    meta.provisioned = True
    write_meta(root, meta)
    return meta, user.note


def make_server_dir(root: Path, user: ServerUser) -> Path:
    """root/server when the server's account can reach it and a socket path in it fits,
    else a fresh private directory under /var/tmp (mkdtemp: an unpredictable name that
    no one else can have made first)."""
    inside = root / "server"
    paths = InstancePaths(root)
    if inside.is_symlink():
        inside.unlink()
    shutil.rmtree(inside, ignore_errors=True)
    if paths.socket_fits(inside) and user.can_traverse(root):
        inside.mkdir(mode=0o700)
        server_dir = inside
    else:
        server_dir = Path(tempfile.mkdtemp(prefix="stackrace-mariadb-", dir=shadow_base()))
        madeby.mark(server_dir, "the private MariaDB's server files")
        # a pointer for people looking in the instance's directory (instance.json is
        # what stackrace reads); `rm -rf` of the directory would not follow it: delete
        # an instance with `stackrace db reset --wipe`
        inside.symlink_to(server_dir, target_is_directory=True)
    user.own(server_dir, 0o700)
    return server_dir


def check_server_dir(meta: InstanceMeta, d: Path) -> None:
    """The server directory must still be the private one made at install: a real
    directory (not a link), owned by the server's account, closed to others."""
    user = server_user_of(meta)
    try:
        st = d.lstat()
    except FileNotFoundError:
        raise DbError(
            f"the private MariaDB's directory {d} is gone: `stackrace db reset --wipe`, "
            "then `stackrace db up`"
        ) from None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != user.uid or st.st_mode & 0o077:
        raise DbError(
            f"{d} is no longer the private directory stackrace made (owner or mode "
            "changed); `stackrace db reset --wipe` makes a new instance"
        )


def remove_server_dir(root: Path, d: Path) -> None:
    """Delete a server directory we made; never one that is a link or someone else's."""
    try:
        st = d.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        return
    if d.parent == root or d.name.startswith("stackrace-mariadb-"):
        shutil.rmtree(d, ignore_errors=True)


def remove_files(root: Path) -> None:
    """Everything of the instance outside `root`: its server dir, a legacy socket."""
    meta = None
    with contextlib.suppress(DbError):
        meta = read_meta(root)
    with contextlib.suppress(FileNotFoundError):
        instance_paths(root).socket.unlink()
    if meta is not None and meta.server_dir:
        remove_server_dir(root, Path(meta.server_dir))


def retire_old_layout(
    root: Path, child: subprocess.Popen[bytes] | None = None
) -> tuple[int | None, str]:
    """An instance made by the first build (see LAYOUT), stopped if it runs and deleted:
    the port it had (the new instance keeps the port the user knew), and what to tell
    the user ("" when there was none). `child`: the server this process started, if any
    (reaped, not left a zombie, should it be the one stopped)."""
    meta = read_meta(root)
    legacy_data = root / "data"
    if meta is not None and meta.layout >= LAYOUT:
        return None, ""
    if meta is None and not legacy_data.is_dir():
        return None, ""
    old = InstancePaths(root, server=root)  # the first build's layout
    pid = read_pid(old.pid_file)
    if pid is not None and is_our_server(pid, old.datadir):  # still running: stop it
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if not wait_gone(pid, 60.0, old.datadir, child):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            wait_gone(pid, 10.0, old.datadir, child)
    with contextlib.suppress(FileNotFoundError):
        old.socket.unlink()
    shutil.rmtree(legacy_data, ignore_errors=True)
    for name in ("mariadbd.pid", "mariadbd.err", "instance.json", "install.log"):
        with contextlib.suppress(FileNotFoundError):
            (root / name).unlink()
    return meta.port if meta is not None else None, (
        f"the private MariaDB in {root} was made by an earlier stackrace whose "
        "first start was reachable without a password; it was deleted and made again "
        "(the seed is redone)"
    )


def log_tail(path: Path, offset: int = 0, lines: int = 15) -> str:
    """The last lines written to a log since `offset`."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])
