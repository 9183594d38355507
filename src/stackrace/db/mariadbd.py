"""mariadbd's command line for the private instance: its own files only, loopback only
on a port that is free, the benchmark's settings, and a connection budget that fits
under the descriptors this process may give it.

Every option is here, with why (a load test opens and drops connections by the thousand;
the classic experiment caches no query; the seed table is not precious data), so what the
database does during a race is read in one place; starting and stopping the server is
stackrace.db.managed's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from stackrace.base.ports import free_port, pid_listening_on, port_in_use
from stackrace.db.errors import DbError
from stackrace.db.paths import InstancePaths
from stackrace.db.proc import nofile_hard_limit, process_name
from stackrace.db.server_user import ServerUser

LOOPBACK = "127.0.0.1"  # the only address the server listens on

# mariadbd wants about this many descriptors beyond one per connection (tables, logs)
_TABLE_OPEN_CACHE = 400
_FD_HEADROOM = 2 * _TABLE_OPEN_CACHE + 200


def connection_budget(max_connections: int) -> tuple[int, int]:
    """max_connections and open_files_limit that fit under the hard RLIMIT_NOFILE."""
    hard = nofile_hard_limit()
    wanted = max_connections + _FD_HEADROOM
    if hard == -1 or hard >= wanted:  # RLIM_INFINITY is -1
        return max_connections, wanted
    return max(10, hard - _FD_HEADROOM), hard


def server_args(
    mariadbd: Path,
    paths: InstancePaths,
    user: ServerUser,
    port: int,
    max_connections: int,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """mariadbd's command line: private files, loopback only, benchmark-friendly
    settings; `extra_args` after ours (they win)."""
    max_conn, fd_limit = connection_budget(max_connections)
    args = [
        str(mariadbd),
        "--no-defaults",
        *user.user_arg,  # as root: the mysql account where there is one
        f"--datadir={paths.datadir}",
        f"--tmpdir={paths.tmp_dir}",
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
    return args + list(extra_args)


def usable_port(port: int, movable: bool) -> tuple[int, str]:
    """`port`, or where it is taken and it is `movable` (nobody asked for it: a scoped
    instance lives as long as the command, and the apps learn its port from their
    environment, so no one needs it fixed), a free one, said in a note ("" when not
    moved). A port asked for (`db up --port`), or the service's, must be free: the
    DbError says how to choose another."""
    if not 1 <= port <= 65535:
        raise DbError(f"port {port} is not a valid TCP port")
    if not port_in_use(port, LOOPBACK):
        return port, ""
    pid = pid_listening_on(port)
    who = f" by {process_name(pid)} (pid {pid})" if pid else ""
    if movable:
        moved = free_port(LOOPBACK)
        return moved, (
            f"port {port} on {LOOPBACK} is in use{who}: the private MariaDB listens on "
            f"{moved} instead (`stackrace db up --port PORT` fixes one)"
        )
    raise DbError(
        f"port {port} on {LOOPBACK} is already in use{who}; choose another with "
        "`stackrace db up --port PORT` (the instance keeps it), or set STACKRACE_DB_DIR "
        "for another instance"
    )
