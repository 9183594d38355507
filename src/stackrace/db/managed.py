"""The private MariaDB instance: install, start, stop, status, seed, reset.

Two lifetimes:
- a service (`scoped=False`, what `stackrace db up` makes): started in its own session with
  stdin closed; it outlives the command and the user stops it with `stackrace db down`;
- process-scoped (`scoped=True`, for tests and `stackrace bench`): a watchdog process
  (`stackrace.supervise.watchdog`) sends it SIGTERM when its owner dies, even by SIGKILL —
  PR_SET_PDEATHSIG alone is not enough, the kernel clears it when mariadbd switches to
  the `mysql` account — and `close()` or leaving the `with` block stops it. A server
  already running on the same directory is reused and left running.

Never reachable without a password: a new instance is installed and provisioned offline
(`mariadbd --bootstrap`, see `stackrace.db.provision`) before its first start opens the
TCP port; it runs as the `mysql` account where there is one (`stackrace.db.server_user`)
with `secure_file_priv` set to a directory of its own; and every `up` drops accounts that
provisioning did not make. An instance made by an earlier stackrace (layout 1: its first
start listened with a passwordless root) cannot be trusted and is deleted and made again.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import fcntl
import os
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

import msgspec
import pymysql

from stackrace.base import madeby
from stackrace.base.ports import free_port, pid_listening_on, port_in_use
from stackrace.db import admin, provision, server_user
from stackrace.db import seed as seeding
from stackrace.db.errors import DbError
from stackrace.db.paths import InstancePaths, default_dir, find_binary, shadow_base
from stackrace.db.proc import (
    is_our_server,
    nofile_hard_limit,
    process_name,
    read_pid,
)
from stackrace.db.server_user import ServerUser
from stackrace.db.settings import DbSettings
from stackrace.supervise.procs import die_with_parent
from stackrace.supervise.watchdog import Watchdog

MADE_FOR = "the private MariaDB (data, passwords, logs)"  # its directory's marker (madeby)

DEFAULT_PORT = 13306
DEFAULT_MAX_CONNECTIONS = 4000
DB_NAME = "stackrace"
DB_USER = "stackrace"
LOOPBACK = "127.0.0.1"

# a scoped server's watchdog waits this long for a clean shutdown before SIGKILL
_WATCHDOG_GRACE_S = 30.0

# mariadbd wants about this many descriptors beyond one per connection (tables, logs)
_TABLE_OPEN_CACHE = 400
_FD_HEADROOM = 2 * _TABLE_OPEN_CACHE + 200

# 2: server files in a directory of the server account's, provisioned before the first
# start. 1 (instance.json without `layout`): made by the first build, whose first start
# listened on TCP with a passwordless root; such an instance is deleted and made again.
LAYOUT = 2

State = Literal["running", "stopped", "not installed", "unreachable"]


class InstanceMeta(msgspec.Struct, kw_only=True):
    """instance.json: what later commands need to find and log in to the instance."""

    port: int
    password: str  # the `stackrace` user's
    admin_password: str  # root's, set during provisioning
    provisioned: bool = False  # bootstrap provisioning finished: the server may start
    layout: int = 1
    server_dir: str = ""  # where the server's files are (see InstancePaths)
    run_as: str = ""  # mariadbd's --user ("" when stackrace is not root)


class DbStatus(msgspec.Struct, kw_only=True):
    """One look at a database: managed or external, and what the server reports."""

    kind: Literal["managed", "external"]
    state: State
    settings: DbSettings | None = None
    dir: str | None = None
    pid: int | None = None
    log_file: str | None = None
    facts: admin.ServerFacts | None = None
    seed: seeding.SeedState | None = None
    error: str | None = None
    run_as: str | None = None  # the OS account mariadbd runs as (managed only)
    secure_file_priv: str | None = None  # the only directory it reads or writes files in
    notes: list[str] = msgspec.field(default_factory=list)  # things the user should know


class ManagedMariaDB:
    """A private MariaDB under `root` (default: the user's cache dir), on its own port."""

    kind: Literal["managed"] = "managed"

    def __init__(
        self,
        root: Path | str | None = None,
        port: int | None = None,
        *,
        scoped: bool = False,
        bindir: str | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        start_timeout: float = 60.0,
        extra_args: Sequence[str] = (),
        run_as: str = server_user.PREFERRED,
    ) -> None:
        self.root = Path(root) if root is not None else default_dir()
        self.scoped = scoped
        self.bindir = bindir  # os.pathsep-separated dirs to find the binaries in
        self.max_connections = max_connections
        self.start_timeout = start_timeout
        self.extra_args = list(extra_args)  # more mariadbd options, after ours (they win)
        self._port_arg = port
        self.run_as = run_as  # the account a new instance runs as, when stackrace is root
        self._old_port: int | None = None  # the port of a retired first-build instance
        self._proc: subprocess.Popen[bytes] | None = None  # set only when we started it
        self._atexit_registered = False
        self._watchdog: Watchdog | None = None  # a scoped server's: stops it if we die
        self._mariadbd: Path | None = None
        self._log_offset = 0
        self.notes: list[str] = []  # said once by `up` (run as root, an instance remade)
        self.started = False  # the last `up` started the server (not found it running)
        self.waited = False  # ... and had to wait for another `up` holding the start

    @property
    def paths(self) -> InstancePaths:
        """Where the files are, from instance.json (another process may have made it)."""
        try:
            meta = self._meta()
        except DbError:
            meta = None
        if meta is None:
            return InstancePaths(self.root)
        if meta.layout < LAYOUT:
            return InstancePaths(self.root, server=self.root)  # the first build's layout
        return InstancePaths(self.root, server=Path(meta.server_dir) if meta.server_dir else None)

    # ---- what callers use -------------------------------------------------------------

    @property
    def settings(self) -> DbSettings:
        """How apps connect: TCP on loopback, or the unix socket; user `stackrace`."""
        meta = self._meta()
        if meta is None:
            raise DbError(
                f"the private MariaDB in {self.root} is not set up: run `stackrace db up`"
            )
        return DbSettings(
            host=LOOPBACK,
            port=meta.port,
            socket=str(self.paths.socket),
            user=DB_USER,
            password=meta.password,
            database=DB_NAME,
        )

    def pid(self) -> int | None:
        """The server's pid when it is running, else None."""
        pid = read_pid(self.paths.pid_file)
        if pid is not None and is_our_server(pid, self.paths.datadir):
            return pid
        if self._proc is not None and self._proc.poll() is None:
            return self._proc.pid  # started, pid file not written yet
        return None

    def is_running(self) -> bool:
        return self.pid() is not None

    @property
    def owns_server(self) -> bool:
        """True when this object started the server (and a scoped one will stop it)."""
        return self._proc is not None and self._proc.poll() is None

    def up(self) -> DbSettings:
        """Install and provision if needed, start unless running; drop foreign accounts."""
        with self._up_lock():
            self._retire_old_layout()
            self.started = not self._reuse_running()
            if self.started:
                self._prepare()
                self._spawn()
                self._wait_ready()
            self._enforce_accounts()
            return self.settings

    async def up_async(self) -> DbSettings:
        """`up` without blocking the event loop; the server is forked from the loop's thread,
        so a scoped server's parent-death signal is tied to that long-lived thread."""
        lock_fd = await asyncio.to_thread(self._acquire_up_lock)
        try:
            await asyncio.to_thread(self._retire_old_layout)
            self.started = not await asyncio.to_thread(self._reuse_running)
            if self.started:
                await asyncio.to_thread(self._prepare)
                self._spawn()
                await asyncio.to_thread(self._wait_ready)
            await asyncio.to_thread(self._enforce_accounts)
            return self.settings
        finally:
            os.close(lock_fd)

    def down(self, timeout: float = 60.0) -> bool:
        """Stop the server (SIGTERM, then SIGKILL after `timeout`); False if it was not running."""
        pid = self.pid()
        if pid is None:
            self._release_watchdog()
            self._forget_stale_pid()
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if not self._wait_gone(pid, timeout):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            self._wait_gone(pid, 10.0)
        self._proc = None
        self._release_watchdog()
        self._forget_stale_pid()
        return True

    def _release_watchdog(self) -> None:
        dog, self._watchdog = self._watchdog, None
        if dog is not None:
            dog.close()  # "bye": the server is stopped (or no longer ours to stop)

    def close(self) -> None:
        """Stop the server if this object started it as a scoped one; else leave it running."""
        if self.scoped and self.owns_server:
            self.down()

    def status(self) -> DbStatus:
        paths = self.paths
        meta = self._meta()
        base: dict = {
            "kind": "managed",
            "dir": str(paths.root),
            "log_file": str(paths.log_file),
            "notes": list(self.notes),
        }
        if meta is not None and meta.layout < LAYOUT:
            base["notes"].append(
                "made by an earlier stackrace, whose first start was reachable without a "
                "password: the next `stackrace db up` deletes it and makes a new one"
            )
        elif meta is not None:
            user = self._server_user(meta, strict=False)
            base["run_as"] = user.name or _whoami()
            base["secure_file_priv"] = str(paths.files_dir)
            if user.note:
                base["notes"].append(user.note)
        if meta is None or not meta.provisioned or not (paths.datadir / "mysql").is_dir():
            return DbStatus(state="not installed", **base)
        pid = self.pid()
        if pid is None:
            return DbStatus(state="stopped", settings=self.settings, **base)
        try:
            with self.admin_connection(database=DB_NAME) as conn:
                facts = admin.server_facts(conn, DB_NAME)
                state = seeding.seed_state(conn)
        except DbError as exc:
            return DbStatus(
                state="unreachable", settings=self.settings, pid=pid, error=str(exc), **base
            )
        return DbStatus(
            state="running", settings=self.settings, pid=pid, facts=facts, seed=state, **base
        )

    def seed(
        self,
        rows: int = seeding.DEFAULT_ROWS,
        engine: str = "myisam",
        *,
        force: bool = False,
        random_seed: int = seeding.DEFAULT_SEED,
    ) -> seeding.SeedResult:
        """Fill table `test` (skipped when a completed seed with these parameters exists);
        refused when its data directory lacks the space, stopped on the server on Ctrl-C."""
        self._require_running()
        datadir = self.paths.datadir
        st = os.statvfs(datadir)
        with admin.closing(self.connection()) as conn:
            return seeding.seed(
                conn,
                rows,
                engine,
                force=force,
                random_seed=random_seed,
                connect=self.connection,
                free_bytes=(str(datadir), st.f_bavail * st.f_frsize),
            )

    def seed_state(self) -> seeding.SeedState | None:
        self._require_running()
        with self.connection() as conn:
            return seeding.seed_state(conn)

    def reset(self, wipe: bool = False) -> None:
        """Drop the seeded tables; with `wipe`, stop the server and delete the whole instance."""
        if wipe:
            self.down()
            self._remove_files()
            shutil.rmtree(self.root, ignore_errors=True)
            return
        self._require_running()
        with self.connection() as conn:
            seeding.drop_seed(conn)

    def ensure_ready(self, rows: int = seeding.DEFAULT_ROWS, engine: str = "myisam") -> DbSettings:
        """Start if needed and seed if needed; return the settings apps connect with."""
        settings = self.up()
        self.seed(rows, engine)
        return settings

    async def ensure_ready_async(
        self, rows: int = seeding.DEFAULT_ROWS, engine: str = "myisam"
    ) -> DbSettings:
        settings = await self.up_async()
        await asyncio.to_thread(self.seed, rows, engine)
        return settings

    def connection(self) -> pymysql.connections.Connection:
        """A connection as the app user, to database `stackrace`, over the unix socket."""
        return admin.connect(self.settings)

    def admin_connection(self, database: str | None = None) -> pymysql.connections.Connection:
        """A root connection over the unix socket (root has no TCP account)."""
        meta = self._meta()
        if meta is None:
            raise DbError(f"the private MariaDB in {self.root} is not set up")
        # root has had its password since provisioning, before the first start
        return admin.connect(
            self.settings,
            user="root",
            password=meta.admin_password,
            database=database or "",
            via_socket=True,
        )

    def __enter__(self) -> ManagedMariaDB:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> ManagedMariaDB:
        await self.up_async()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)

    # ---- steps of `up` ----------------------------------------------------------------

    def _acquire_up_lock(self) -> int:
        """An exclusive flock on root/up.lock: two `up`s at once (say bench and the user)
        would otherwise both install or both start a server on the same data directory."""
        madeby.make_dir(self.root, MADE_FOR)
        fd = os.open(self.root / "up.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.waited = False
        except BlockingIOError:  # another `up` is installing or starting it: wait for it
            self.waited = True
            fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    @contextlib.contextmanager
    def _up_lock(self) -> Iterator[None]:
        fd = self._acquire_up_lock()
        try:
            yield
        finally:
            os.close(fd)

    def _reuse_running(self) -> bool:
        """True when our server already runs (then the requested port must match)."""
        if self.pid() is None:
            return False
        meta = self._meta()
        if meta is not None and self._port_arg is not None and self._port_arg != meta.port:
            raise DbError(
                f"the private MariaDB already runs on port {meta.port}; stop it first "
                f"(stackrace db down) to move it to port {self._port_arg}"
            )
        return True

    def _retire_old_layout(self) -> None:
        """An instance made by the first build is stopped and deleted (see LAYOUT)."""
        meta = self._meta()
        legacy_data = self.root / "data"
        if meta is not None and meta.layout >= LAYOUT:
            return
        if meta is None and not legacy_data.is_dir():
            return
        if meta is not None:
            self._old_port = meta.port  # the new instance keeps the port the user knew
        old = InstancePaths(self.root, server=self.root)  # the first build's layout
        pid = read_pid(old.pid_file)
        if pid is not None and is_our_server(pid, old.datadir):  # still running: stop it
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            if not self._wait_gone(pid, 60.0, old.datadir):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                self._wait_gone(pid, 10.0, old.datadir)
        with contextlib.suppress(FileNotFoundError):
            old.socket.unlink()
        shutil.rmtree(legacy_data, ignore_errors=True)
        for name in ("mariadbd.pid", "mariadbd.err", "instance.json", "install.log"):
            with contextlib.suppress(FileNotFoundError):
                (self.root / name).unlink()
        self.notes.append(
            f"the private MariaDB in {self.root} was made by an earlier stackrace whose "
            "first start was reachable without a password; it was deleted and made again "
            "(the seed is redone)"
        )

    def _prepare(self) -> None:
        """Check binaries and the port; install and provision if not done (or half done)."""
        mariadbd = find_binary("mariadbd", self.bindir)
        self._mariadbd = mariadbd
        self._forget_stale_pid()
        meta = self._meta()
        port = self._port_arg or (meta.port if meta else self._old_port or DEFAULT_PORT)
        port = self._usable_port(port)
        if meta is None or not meta.provisioned or not (self.paths.datadir / "mysql").is_dir():
            meta = self._install(port)
        if meta.port != port:
            meta.port = port
            self._write_meta(meta)
        self._check_server_dir(meta)

    def _usable_port(self, port: int) -> int:
        """`port`, or where it is taken and nobody asked for it, a free one (a scoped
        instance: it lives as long as the command, and the apps learn its port from
        their environment, so no one needs it fixed). A port asked for (`db up --port`),
        or the service's, must be free: the error says how to choose another."""
        if not 1 <= port <= 65535:
            raise DbError(f"port {port} is not a valid TCP port")
        if not port_in_use(port, LOOPBACK):
            return port
        pid = pid_listening_on(port)
        who = f" by {process_name(pid)} (pid {pid})" if pid else ""
        if self.scoped and self._port_arg is None:
            moved = free_port(LOOPBACK)
            self.notes.append(
                f"port {port} on {LOOPBACK} is in use{who}: the private MariaDB listens on "
                f"{moved} instead (`stackrace db up --port PORT` fixes one)"
            )
            return moved
        raise DbError(
            f"port {port} on {LOOPBACK} is already in use{who}; choose another with "
            "`stackrace db up --port PORT` (the instance keeps it), or set STACKRACE_DB_DIR "
            "for another instance"
        )

    def _install(self, port: int) -> InstanceMeta:
        """A fresh server directory, mariadb-install-db, then provisioning in bootstrap.

        What a half-made instance left (a crash, a failed install) is removed first. The
        passwords are in instance.json before the server directory exists, so a crash at
        any point leaves a record the next `up` can clean up from.
        """
        user = server_user.choose(self.run_as)
        old = self._meta()
        if old is not None and old.server_dir:
            self._remove_server_dir(Path(old.server_dir))
        madeby.make_dir(self.root, MADE_FOR)
        # others may only pass through (to root/server, if that is the server's directory)
        os.chmod(self.root, 0o700 if user.uid == os.geteuid() else 0o711)
        server_dir = self._make_server_dir(user)
        meta = InstanceMeta(
            port=port,
            password=secrets.token_urlsafe(18),
            admin_password=secrets.token_urlsafe(18),
            layout=LAYOUT,
            server_dir=str(server_dir),
            run_as=user.name,
        )
        self._write_meta(meta)
        paths = InstancePaths(self.root, server=server_dir)
        for d in (paths.datadir, paths.files_dir):
            d.mkdir()
            user.own(d, 0o700)
        install_db = find_binary("mariadb-install-db", self.bindir)
        log = paths.install_log
        with contextlib.suppress(FileNotFoundError):
            log.unlink()
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        cmd = [
            str(install_db),
            "--no-defaults",  # must come first: ignore /etc/mysql and ~/.my.cnf
            f"--datadir={paths.datadir}",
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
                log_tail=_tail(log),
            )
        assert self._mariadbd is not None
        provision.bootstrap(
            self._mariadbd,
            paths.datadir,
            user,
            provision.bootstrap_sql(DB_NAME, DB_USER, meta.password, meta.admin_password),
            log,
        )
        meta.provisioned = True
        self._write_meta(meta)
        if user.note:
            self.notes.append(user.note)
        return meta

    def _make_server_dir(self, user: ServerUser) -> Path:
        """root/server when the server's account can reach it and a socket path in it fits,
        else a fresh private directory under /var/tmp (mkdtemp: an unpredictable name that
        no one else can have made first)."""
        inside = self.root / "server"
        paths = InstancePaths(self.root)
        if inside.is_symlink():
            inside.unlink()
        shutil.rmtree(inside, ignore_errors=True)
        if paths.socket_fits(inside) and user.can_traverse(self.root):
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

    def _check_server_dir(self, meta: InstanceMeta) -> None:
        """The server directory must still be the private one made at install: a real
        directory (not a link), owned by the server's account, closed to others."""
        user = self._server_user(meta)
        d = self.paths.server_dir
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

    def _server_user(self, meta: InstanceMeta, strict: bool = True) -> ServerUser:
        try:
            return server_user.recorded(meta.run_as)
        except LookupError:
            if not strict:
                return ServerUser(name=meta.run_as, uid=-1, gid=-1, groups=frozenset())
            raise DbError(
                f"the private MariaDB was made to run as '{meta.run_as}', which no longer "
                "exists: `stackrace db reset --wipe` makes a new instance"
            ) from None

    def _remove_server_dir(self, d: Path) -> None:
        """Delete a server directory we made; never one that is a link or someone else's."""
        try:
            st = d.lstat()
        except FileNotFoundError:
            return
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            return
        if d.parent == self.root or d.name.startswith("stackrace-mariadb-"):
            shutil.rmtree(d, ignore_errors=True)

    def _remove_files(self) -> None:
        """Everything of the instance outside `root`: its server dir, a legacy socket."""
        meta = None
        with contextlib.suppress(DbError):
            meta = self._meta()
        with contextlib.suppress(FileNotFoundError):
            self.paths.socket.unlink()
        if meta is not None and meta.server_dir:
            self._remove_server_dir(Path(meta.server_dir))

    def server_args(self, port: int) -> list[str]:
        """mariadbd's command line: private files, loopback only, benchmark-friendly settings."""
        max_conn, fd_limit = self._connection_budget()
        meta = self._meta()
        assert meta is not None
        user = self._server_user(meta)
        paths = self.paths
        args = [
            str(self._mariadbd),
            "--no-defaults",
            *user.user_arg,  # as root: the mysql account where there is one
            f"--datadir={paths.datadir}",
            f"--socket={paths.socket}",
            f"--pid-file={paths.pid_file}",
            f"--log-error={paths.log_file}",
            f"--port={port}",
            f"--bind-address={LOOPBACK}",
            "--skip-name-resolve",
            # no file outside its own directory: not `INTO OUTFILE`, not LOAD_FILE()
            f"--secure-file-priv={paths.files_dir}",
            # as in the original experiment: every query does the work, none is cached
            "--query-cache-type=0",
            "--query-cache-size=0",
            f"--max-connections={max_conn}",
            f"--open-files-limit={fd_limit}",
            f"--table-open-cache={_TABLE_OPEN_CACHE}",
            # load tests open and drop connections by the thousand; never block the host
            "--max-connect-errors=1000000000",
            "--back-log=2000",
            "--thread-cache-size=256",
            # 1M rows are ~15 MB of MyISAM index or ~40 MB of InnoDB pages: all fit in RAM
            "--innodb-buffer-pool-size=256M",
            "--key-buffer-size=64M",
            # a benchmark table, not precious data: skip the fsync per commit
            "--innodb-flush-log-at-trx-commit=2",
            "--local-infile=0",
        ]
        return args + self.extra_args

    def _connection_budget(self) -> tuple[int, int]:
        """max_connections and open_files_limit that fit under the hard RLIMIT_NOFILE."""
        hard = nofile_hard_limit()
        wanted = self.max_connections + _FD_HEADROOM
        if hard == -1 or hard >= wanted:  # RLIM_INFINITY is -1
            return self.max_connections, wanted
        return max(10, hard - _FD_HEADROOM), hard

    def _spawn(self) -> None:
        """Fork mariadbd: own session, stdin closed, output appended to its error log."""
        meta = self._meta()
        assert meta is not None
        paths = self.paths
        self._log_offset = _size(paths.log_file)
        with contextlib.suppress(FileNotFoundError):
            paths.socket.unlink()  # a socket file left by a killed server
        # mariadbd opens --log-error itself after switching user: the file must be its own
        fd = os.open(paths.log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._server_user(meta).own(paths.log_file, 0o600)
        with os.fdopen(fd, "ab") as log:
            self._proc = subprocess.Popen(
                self.server_args(meta.port),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # SIGTERM, not SIGKILL: mariadbd shuts down cleanly on it, so MyISAM
                # tables are not left marked as crashed
                preexec_fn=die_with_parent(signal.SIGTERM) if self.scoped else None,
                close_fds=True,
            )
        if self.scoped:
            # the parent-death signal set above is cleared when mariadbd switches user
            self._watchdog = Watchdog(grace=_WATCHDOG_GRACE_S)
            self._watchdog.watch(self._proc.pid)  # its own session: sid == pid
        if self.scoped and not self._atexit_registered:
            atexit.register(self.close)
            self._atexit_registered = True

    def _wait_ready(self) -> None:
        """Until the server accepts a login on its socket; a dead server is an error."""
        assert self._proc is not None
        deadline = time.monotonic() + self.start_timeout
        while True:
            rc = self._proc.poll()
            if rc is not None:
                self._proc = None
                raise DbError(
                    f"mariadbd exited with code {rc} during start-up (log: {self.paths.log_file})",
                    log_tail=_tail(self.paths.log_file, self._log_offset),
                )
            if self.paths.socket.exists() and _accepts(self.paths.socket):
                try:
                    self.admin_connection().close()
                    return
                except DbError:
                    pass  # listening but not ready yet (still starting)
            if time.monotonic() > deadline:
                self.down(timeout=5)
                raise DbError(
                    f"mariadbd did not get ready within {self.start_timeout:.0f} s",
                    log_tail=_tail(self.paths.log_file, self._log_offset),
                )
            time.sleep(0.02)

    def _enforce_accounts(self) -> None:
        """Drop every account provisioning did not make (the server is up and ours).

        Provisioning made exactly the accounts the instance needs, before it first
        listened; any other one was made later by someone with the root password, and a
        private benchmark instance keeps none (docs/db.md says so).
        """
        with self.admin_connection() as conn:
            foreign = provision.foreign_accounts(conn, DB_USER)
            provision.drop_accounts(conn, foreign)
        if foreign:
            names = ", ".join(f"'{u}'@'{h}'" for u, h in foreign)
            self.notes.append(f"dropped accounts stackrace did not make: {names}")

    # ---- small helpers ----------------------------------------------------------------

    def _require_running(self) -> None:
        if self.pid() is None:
            raise DbError(
                f"the private MariaDB in {self.root} is not running: run `stackrace db up`"
            )

    def _wait_gone(self, pid: int, timeout: float, datadir: Path | None = None) -> bool:
        datadir = datadir or self.paths.datadir
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.pid == pid:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(timeout=0.05)  # reap our own child
            if not is_our_server(pid, datadir):
                return True
            time.sleep(0.05)
        return False

    def _forget_stale_pid(self) -> None:
        pid = read_pid(self.paths.pid_file)
        if pid is not None and not is_our_server(pid, self.paths.datadir):
            with contextlib.suppress(FileNotFoundError):
                self.paths.pid_file.unlink()

    def _meta(self) -> InstanceMeta | None:
        meta_file = InstancePaths(self.root).meta_file  # (not self.paths: that reads this)
        try:
            return msgspec.json.decode(meta_file.read_bytes(), type=InstanceMeta)
        except FileNotFoundError:
            return None
        except msgspec.DecodeError as exc:
            raise DbError(f"{meta_file} is damaged ({exc}); `stackrace db reset --wipe`") from None

    def _write_meta(self, meta: InstanceMeta) -> None:
        meta_file = InstancePaths(self.root).meta_file
        tmp = meta_file.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # holds passwords
        with os.fdopen(fd, "wb") as f:
            f.write(msgspec.json.format(msgspec.json.encode(meta)))
        os.replace(tmp, meta_file)


def _accepts(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(0.5)
        return s.connect_ex(str(path)) == 0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _tail(path: Path, offset: int = 0, lines: int = 15) -> str:
    """The last lines written to a log since `offset`."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _whoami() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())
