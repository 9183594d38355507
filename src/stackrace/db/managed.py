"""The private MariaDB instance: up (installed if need be), down, status, seed, reset.

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

The instance's files (its record, server directory, install) are stackrace.db.instance's,
the server's command line stackrace.db.mariadbd's; this module runs the server over them
and is what callers hold.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from stackrace.db import admin, provision, server_user
from stackrace.db import seed as seeding

if TYPE_CHECKING:  # a hint: the driver is imported where it is used (admin.connect)
    import pymysql
from stackrace.db.errors import DbError
from stackrace.db.instance import (
    DB_NAME,
    DB_USER,
    LAYOUT,
    check_server_dir,
    install,
    instance_paths,
    lock_for_up,
    log_tail,
    read_meta,
    remove_files,
    retire_old_layout,
    server_user_of,
    write_meta,
)
from stackrace.db.mariadbd import LOOPBACK, server_args, usable_port
from stackrace.db.paths import InstancePaths, default_dir, find_binary
from stackrace.db.proc import is_our_server, read_pid, wait_gone
from stackrace.db.settings import DbSettings
from stackrace.db.status import DbStatus, whoami
from stackrace.supervise.procs import die_with_parent
from stackrace.supervise.watchdog import Watchdog

DEFAULT_PORT = 13306
DEFAULT_MAX_CONNECTIONS = 4000

# a scoped server's watchdog waits this long for a clean shutdown before SIGKILL
_WATCHDOG_GRACE_S = 30.0


class ManagedMariaDB(seeding.SeededDatabase):
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
        return instance_paths(self.root)

    # ---- what callers use -------------------------------------------------------------

    @property
    def settings(self) -> DbSettings:
        """How apps connect: TCP on loopback, or the unix socket; user `stackrace`."""
        meta = read_meta(self.root)
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
        meta = read_meta(self.root)
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
            user = server_user_of(meta, strict=False)
            base["run_as"] = user.name or whoami()
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

    def _free_space(self, conn: pymysql.connections.Connection) -> tuple[str, int] | None:
        datadir = self.paths.datadir
        st = os.statvfs(datadir)
        return str(datadir), st.f_bavail * st.f_frsize

    def reset(self, wipe: bool = False) -> None:
        """Drop the seeded tables; with `wipe`, stop the server and delete the whole instance."""
        if wipe:
            self.down()
            remove_files(self.root)
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
        meta = read_meta(self.root)
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
        fd, self.waited = lock_for_up(self.root)
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
        meta = read_meta(self.root)
        if meta is not None and self._port_arg is not None and self._port_arg != meta.port:
            raise DbError(
                f"the private MariaDB already runs on port {meta.port}; stop it first "
                f"(stackrace db down) to move it to port {self._port_arg}"
            )
        return True

    def _retire_old_layout(self) -> None:
        """An instance made by the first build is stopped and deleted (see LAYOUT)."""
        old_port, note = retire_old_layout(self.root, self._proc)
        if old_port is not None:
            self._old_port = old_port  # the new instance keeps the port the user knew
        if note:
            self.notes.append(note)

    def _prepare(self) -> None:
        """Check binaries and the port; install and provision if not done (or half done)."""
        mariadbd = find_binary("mariadbd", self.bindir)
        self._mariadbd = mariadbd
        self._forget_stale_pid()
        meta = read_meta(self.root)
        port = self._port_arg or (meta.port if meta else self._old_port or DEFAULT_PORT)
        port, note = usable_port(port, movable=self.scoped and self._port_arg is None)
        if note:
            self.notes.append(note)
        if meta is None or not meta.provisioned or not (self.paths.datadir / "mysql").is_dir():
            assert self._mariadbd is not None
            meta, note = install(self.root, port, self.run_as, self._mariadbd, self.bindir)
            if note:
                self.notes.append(note)
        if meta.port != port:
            meta.port = port
            write_meta(self.root, meta)
        check_server_dir(meta, self.paths.server_dir)

    def _spawn(self) -> None:
        """Fork mariadbd: own session, stdin closed, output appended to its error log."""
        meta = read_meta(self.root)
        assert meta is not None and self._mariadbd is not None  # (found by _prepare)
        paths = self.paths
        self._log_offset = _size(paths.log_file)
        with contextlib.suppress(FileNotFoundError):
            paths.socket.unlink()  # a socket file left by a killed server
        # mariadbd opens --log-error itself after switching user: the file must be its own
        fd = os.open(paths.log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        server_user_of(meta).own(paths.log_file, 0o600)
        if not paths.tmp_dir.is_dir():  # an instance made before it had its own
            paths.tmp_dir.mkdir()
            server_user_of(meta).own(paths.tmp_dir, 0o700)
        with os.fdopen(fd, "ab") as log:
            self._proc = subprocess.Popen(
                server_args(
                    self._mariadbd,
                    paths,
                    server_user_of(meta),
                    meta.port,
                    self.max_connections,
                    self.extra_args,
                ),
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
                    log_tail=log_tail(self.paths.log_file, self._log_offset),
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
                    log_tail=log_tail(self.paths.log_file, self._log_offset),
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

    def _wait_gone(self, pid: int, timeout: float) -> bool:
        return wait_gone(pid, timeout, self.paths.datadir, self._proc)

    def _forget_stale_pid(self) -> None:
        pid = read_pid(self.paths.pid_file)
        if pid is not None and not is_our_server(pid, self.paths.datadir):
            with contextlib.suppress(FileNotFoundError):
                self.paths.pid_file.unlink()


def _accepts(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(0.5)
        return s.connect_ex(str(path)) == 0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
