"""The private MariaDB instance: install, start, stop, status, seed, reset.

Two lifetimes:
- a service (`scoped=False`, what `stackrace db up` makes): started in its own session with
  stdin closed; it outlives the command and the user stops it with `stackrace db down`;
- process-scoped (`scoped=True`, for tests and `stackrace bench`): it gets SIGTERM from the
  kernel when the thread that started it ends (PR_SET_PDEATHSIG), and `close()` or leaving
  the `with` block stops it. A server already running on the same directory is reused and
  left running.
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
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

import msgspec
import pymysql

from stackrace.db import admin
from stackrace.db import seed as seeding
from stackrace.db.errors import DbError
from stackrace.db.paths import InstancePaths, default_dir, find_binary
from stackrace.db.proc import (
    die_with_parent,
    is_our_server,
    listener_pid,
    nofile_hard_limit,
    port_in_use,
    process_name,
    read_pid,
)
from stackrace.db.settings import DbSettings

DEFAULT_PORT = 13306
DEFAULT_MAX_CONNECTIONS = 4000
DB_NAME = "stackrace"
DB_USER = "stackrace"
LOOPBACK = "127.0.0.1"

# mariadbd wants about this many descriptors beyond one per connection (tables, logs)
_TABLE_OPEN_CACHE = 400
_FD_HEADROOM = 2 * _TABLE_OPEN_CACHE + 200

State = Literal["running", "stopped", "not installed", "unreachable"]


class InstanceMeta(msgspec.Struct, kw_only=True):
    """instance.json: what later commands need to find and log in to the instance."""

    port: int
    password: str  # the `stackrace` user's
    admin_password: str  # root's, set during provisioning
    provisioned: bool = False


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
    ) -> None:
        self.paths = InstancePaths(Path(root) if root is not None else default_dir())
        self.scoped = scoped
        self.bindir = bindir  # os.pathsep-separated dirs to find the binaries in
        self.max_connections = max_connections
        self.start_timeout = start_timeout
        self.extra_args = list(extra_args)  # more mariadbd options, after ours (they win)
        self._port_arg = port
        self._proc: subprocess.Popen[bytes] | None = None  # set only when we started it
        self._atexit_registered = False
        self._mariadbd: Path | None = None
        self._log_offset = 0

    # ---- what callers use -------------------------------------------------------------

    @property
    def settings(self) -> DbSettings:
        """How apps connect: TCP on loopback, or the unix socket; user `stackrace`."""
        meta = self._meta()
        if meta is None:
            raise DbError(
                f"the private MariaDB in {self.paths.root} is not set up: run `stackrace db up`"
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
        """Install if needed, start unless running, create the database and user."""
        with self._up_lock():
            if self._reuse_running():
                self._provision()
                return self.settings
            self._prepare()
            self._spawn()
            self._wait_ready()
            self._provision()
            return self.settings

    async def up_async(self) -> DbSettings:
        """`up` without blocking the event loop; the server is forked from the loop's thread,
        so a scoped server's parent-death signal is tied to that long-lived thread."""
        lock_fd = await asyncio.to_thread(self._acquire_up_lock)
        try:
            if not await asyncio.to_thread(self._reuse_running):
                await asyncio.to_thread(self._prepare)
                self._spawn()
                await asyncio.to_thread(self._wait_ready)
            await asyncio.to_thread(self._provision)
            return self.settings
        finally:
            os.close(lock_fd)

    def down(self, timeout: float = 60.0) -> bool:
        """Stop the server (SIGTERM, then SIGKILL after `timeout`); False if it was not running."""
        pid = self.pid()
        if pid is None:
            self._forget_stale_pid()
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if not self._wait_gone(pid, timeout):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            self._wait_gone(pid, 10.0)
        self._proc = None
        self._forget_stale_pid()
        return True

    def close(self) -> None:
        """Stop the server if this object started it as a scoped one; else leave it running."""
        if self.scoped and self.owns_server:
            self.down()

    def status(self) -> DbStatus:
        base = {
            "kind": "managed",
            "dir": str(self.paths.root),
            "log_file": str(self.paths.log_file),
        }
        meta = self._meta()
        if meta is None or not (self.paths.datadir / "mysql").is_dir():
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
        """Fill table `test` (skipped when a completed seed with these parameters exists)."""
        self._require_running()
        with self.connection() as conn:
            return seeding.seed(conn, rows, engine, force=force, random_seed=random_seed)

    def seed_state(self) -> seeding.SeedState | None:
        self._require_running()
        with self.connection() as conn:
            return seeding.seed_state(conn)

    def reset(self, wipe: bool = False) -> None:
        """Drop the seeded tables; with `wipe`, stop the server and delete the whole instance."""
        if wipe:
            self.down()
            with contextlib.suppress(FileNotFoundError):
                self.paths.socket.unlink()
            shutil.rmtree(self.paths.root, ignore_errors=True)
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
            raise DbError(f"the private MariaDB in {self.paths.root} is not set up")
        try:
            return admin.connect(
                self.settings,
                user="root",
                password=meta.admin_password,
                database=database or "",
                via_socket=True,
            )
        except DbError:
            if meta.provisioned:
                raise
            # not provisioned yet: root still has the empty password install-db gave it
            return admin.connect(
                self.settings,
                user="root",
                password="",
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
        self.paths.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.paths.root / "up.lock", os.O_RDWR | os.O_CREAT, 0o600)
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

    def _prepare(self) -> None:
        """Check binaries and the port, install the data directory if it is missing."""
        mariadbd = find_binary("mariadbd", self.bindir)
        self._forget_stale_pid()
        meta = self._meta()
        port = self._port_arg or (meta.port if meta else DEFAULT_PORT)
        self._check_port(port)
        if meta is None or not (self.paths.datadir / "mysql").is_dir():
            meta = self._install(port)
        if meta.port != port:
            meta.port = port
            self._write_meta(meta)
        self._mariadbd = mariadbd

    def _check_port(self, port: int) -> None:
        if not 1 <= port <= 65535:
            raise DbError(f"port {port} is not a valid TCP port")
        if port_in_use(port, LOOPBACK):
            pid = listener_pid(port)
            who = f" by {process_name(pid)} (pid {pid})" if pid else ""
            raise DbError(
                f"port {port} on {LOOPBACK} is already in use{who}; "
                "choose another with --port (or STACKRACE_DB_DIR for another instance)"
            )

    def _install(self, port: int) -> InstanceMeta:
        """mariadb-install-db into a fresh data directory (a half-made one is removed)."""
        install_db = find_binary("mariadb-install-db", self.bindir)
        self.paths.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.paths.root, 0o700)
        shutil.rmtree(self.paths.datadir, ignore_errors=True)
        log = self.paths.root / "install.log"
        cmd = [
            str(install_db),
            "--no-defaults",  # must come first: ignore /etc/mysql and ~/.my.cnf
            f"--datadir={self.paths.datadir}",
            "--auth-root-authentication-method=normal",  # else root over TCP gets ERROR 1698
            "--skip-test-db",
        ]
        if os.geteuid() == 0:
            cmd.append("--user=root")
        with open(log, "wb") as out:
            rc = subprocess.run(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                check=False,
            ).returncode
        if rc != 0:
            raise DbError(
                f"mariadb-install-db failed (exit {rc}) in {self.paths.datadir}",
                log_tail=_tail(log),
            )
        meta = InstanceMeta(
            port=port,
            password=secrets.token_urlsafe(18),
            admin_password=secrets.token_urlsafe(18),
        )
        self._write_meta(meta)
        return meta

    def server_args(self, port: int) -> list[str]:
        """mariadbd's command line: private files, loopback only, benchmark-friendly settings."""
        max_conn, fd_limit = self._connection_budget()
        args = [
            str(self._mariadbd),
            "--no-defaults",
            f"--datadir={self.paths.datadir}",
            f"--socket={self.paths.socket}",
            f"--pid-file={self.paths.pid_file}",
            f"--log-error={self.paths.log_file}",
            f"--port={port}",
            f"--bind-address={LOOPBACK}",
            "--skip-name-resolve",
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
        if os.geteuid() == 0:
            args.insert(2, "--user=root")  # mariadbd refuses to run as root otherwise
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
        self._log_offset = _size(self.paths.log_file)
        with contextlib.suppress(FileNotFoundError):
            self.paths.socket.unlink()  # a socket file left by a killed server
        with open(self.paths.log_file, "ab") as log:
            self._proc = subprocess.Popen(
                self.server_args(meta.port),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent(signal.SIGTERM) if self.scoped else None,
                close_fds=True,
            )
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

    def _provision(self) -> None:
        """Create database `stackrace` and user `stackrace`; lock root to the socket.

        Idempotent, and the root password is saved before it is set, so an interruption at
        any point is repaired by the next `up`.
        """
        meta = self._meta()
        assert meta is not None
        if meta.provisioned:
            return
        with self.admin_connection() as conn:
            run = lambda sql, args=None: admin.query(conn, sql, args)  # noqa: E731
            run(f"CREATE DATABASE IF NOT EXISTS {DB_NAME}")
            for host in ("localhost", LOOPBACK):  # localhost = the unix socket
                run(
                    "CREATE USER IF NOT EXISTS %s@%s IDENTIFIED BY %s",
                    (DB_USER, host, meta.password),
                )
                run("ALTER USER %s@%s IDENTIFIED BY %s", (DB_USER, host, meta.password))
                run(f"GRANT ALL PRIVILEGES ON {DB_NAME}.* TO %s@%s", (DB_USER, host))
            # no passwordless root over TCP, no anonymous accounts
            for user, host in run(
                "SELECT User, Host FROM mysql.global_priv "
                "WHERE (User = 'root' AND Host <> 'localhost') OR User = ''"
            ):
                run("DROP USER %s@%s", (user, host))
            run("ALTER USER 'root'@'localhost' IDENTIFIED BY %s", (meta.admin_password,))
        meta.provisioned = True
        self._write_meta(meta)

    # ---- small helpers ----------------------------------------------------------------

    def _require_running(self) -> None:
        if self.pid() is None:
            raise DbError(
                f"the private MariaDB in {self.paths.root} is not running: run `stackrace db up`"
            )

    def _wait_gone(self, pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.pid == pid:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(timeout=0.05)  # reap our own child
            if not is_our_server(pid, self.paths.datadir):
                return True
            time.sleep(0.05)
        return False

    def _forget_stale_pid(self) -> None:
        pid = read_pid(self.paths.pid_file)
        if pid is not None and not is_our_server(pid, self.paths.datadir):
            with contextlib.suppress(FileNotFoundError):
                self.paths.pid_file.unlink()

    def _meta(self) -> InstanceMeta | None:
        try:
            return msgspec.json.decode(self.paths.meta_file.read_bytes(), type=InstanceMeta)
        except FileNotFoundError:
            return None
        except msgspec.DecodeError as exc:
            raise DbError(
                f"{self.paths.meta_file} is damaged ({exc}); `stackrace db reset --wipe`"
            ) from None

    def _write_meta(self, meta: InstanceMeta) -> None:
        tmp = self.paths.meta_file.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # holds passwords
        with os.fdopen(fd, "wb") as f:
            f.write(msgspec.json.format(msgspec.json.encode(meta)))
        os.replace(tmp, self.paths.meta_file)


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
