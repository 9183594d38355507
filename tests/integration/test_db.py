"""The private MariaDB against a real server (setup installs mariadb-server; no mocks).

Every instance lives in a temp dir on a free port, so a user's instance is never touched.
One scoped instance is shared by the module where tests do not need their own.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stackrace.base.ports import port_in_use
from stackrace.cli import main
from stackrace.db import (
    DbError,
    ExternalDatabase,
    ManagedMariaDB,
    check_query_count,
    db_env,
    read_counters,
    settings_from_env,
    sum_is_plausible,
    work_between,
)
from stackrace.db.admin import connect, query
from stackrace.db.proc import is_our_server
from tests.helpers import CLI, free_port, needs_mariadb

pytestmark = needs_mariadb

ROWS = 1_000_000


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagedMariaDB]:
    inst = ManagedMariaDB(tmp_path_factory.mktemp("mariadb"), free_port(), scoped=True)
    inst.up()
    yield inst
    inst.reset(wipe=True)


def test_lifecycle_seed_status_restart_reset(db: ManagedMariaDB) -> None:
    assert db.is_running() and db.owns_server
    result = db.seed(ROWS)
    assert (result.rows, result.engine, result.skipped) == (ROWS, "myisam", False)

    st = db.status()
    assert st.state == "running" and st.facts is not None and st.seed is not None
    v = st.facts.variables
    assert st.facts.test_rows == ROWS and st.facts.test_engine == "MyISAM"
    assert v["query_cache_type"] == "OFF" and v["query_cache_size"] == "0"
    assert int(v["max_connections"]) >= 1000
    assert v["port"] == str(db.settings.port) and v["socket"] == db.settings.socket
    assert st.seed.done

    with db.connection() as conn:
        lo, hi, total = query(conn, "SELECT MIN(value), MAX(value), AVG(value) FROM test")[0]
        assert 0 <= lo < 0.001 and 0.999 < hi < 1 and 0.49 < total < 0.51

    assert db.seed(ROWS).skipped  # idempotent

    assert db.down() and not db.is_running()
    assert db.status().state == "stopped"
    assert not db.down()  # already stopped: not an error

    db.up()
    assert db.seed(ROWS).skipped  # the data survived the restart
    st = db.status()
    assert st.facts is not None and st.facts.test_rows == ROWS

    db.reset()
    st = db.status()
    assert st.facts is not None and st.facts.test_engine is None and st.seed is None


def test_apps_connect_over_tcp_and_socket_with_db_env(db: ManagedMariaDB) -> None:
    db.seed(1000)
    settings = settings_from_env(db_env(db.settings))
    for via_socket in (False, True):
        with connect(settings, via_socket=via_socket) as conn:
            assert query(conn, "SELECT COUNT(*) FROM test")[0][0] == 1000
    # root has no TCP account: only the socket, as the machine's own user
    with pytest.raises(DbError, match="Access denied"):
        connect(settings, user="root", password="", via_socket=False)


def test_innodb_seed(db: ManagedMariaDB) -> None:
    result = db.seed(50_000, "innodb")
    assert not result.skipped
    st = db.status()
    assert st.facts is not None and st.facts.test_engine == "InnoDB"
    assert st.facts.test_rows == 50_000
    # asking for MyISAM afterwards reseeds: the engine is part of what a seed is
    assert not db.seed(50_000, "myisam").skipped


def test_half_done_seed_is_detected_and_redone(db: ManagedMariaDB) -> None:
    db.seed(20_000)
    with db.connection() as conn:  # what a crash after half the rows leaves behind
        query(conn, "UPDATE seed_meta SET done = 0")
        query(conn, "DELETE FROM test WHERE id > 10000")
    seed = db.status().seed
    assert seed is not None and seed.done is False
    result = db.seed(20_000)
    assert result.redone and not result.skipped
    with db.connection() as conn:
        assert query(conn, "SELECT COUNT(*) FROM test")[0][0] == 20_000


def test_killed_seeder_is_detected_and_redone(db: ManagedMariaDB) -> None:
    """SIGKILL a real `stackrace db seed` half-way: the next seed redoes it."""
    db.reset()
    env = {**os.environ, "STACKRACE_DB_DIR": str(db.paths.root)}
    seeder = subprocess.Popen(
        [*CLI, "db", "seed", "--rows", str(ROWS)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            state = db.seed_state()
            if state is not None and not state.done:
                break
            time.sleep(0.01)
        else:
            pytest.fail("the seeder never started")
        seeder.kill()
        seeder.wait()
    finally:
        if seeder.poll() is None:
            seeder.kill()
    state = db.seed_state()
    assert state is not None and not state.done
    result = db.seed(ROWS)
    assert result.redone
    st = db.status()
    assert st.facts is not None and st.facts.test_rows == ROWS


def test_query_counters_and_plausible_sums(db: ManagedMariaDB) -> None:
    db.seed(1000)
    n = 7
    with db.connection() as app, db.connection() as verifier:
        # the seed's own connection says goodbye without waiting, and MariaDB counts that
        # COM_QUIT in Questions (measured): on a busy machine it landed inside the window
        # (CI, Questions 8 for 7 SELECTs), so the window opens once only ours are left
        deadline = time.monotonic() + 10
        while int(query(verifier, "SHOW GLOBAL STATUS LIKE 'Threads_connected'")[0][1]) > 2:
            assert time.monotonic() < deadline, "the seed's connection never went away"
            time.sleep(0.01)
        before = read_counters(verifier)
        sums = []
        for start in (1, 100, 500, 900, 991, 3, 42):
            rows = query(app, "SELECT value FROM test WHERE id >= %s LIMIT 10", (start,))
            sums.append(sum(r[0] for r in rows))
        delta = work_between(before, read_counters(verifier))
    assert delta.com_select == n and delta.questions == n
    assert check_query_count(delta, requests=1, queries_per_request=n) is None
    assert sum_is_plausible(sum(sums), n)


def test_external_server_by_dsn(db: ManagedMariaDB) -> None:
    with db.admin_connection() as root:
        query(root, "CREATE DATABASE IF NOT EXISTS ext")
        query(root, "GRANT ALL ON ext.* TO 'stackrace'@'127.0.0.1'")
    s = db.settings
    ext = ExternalDatabase(f"mysql://{s.user}:{s.password}@127.0.0.1:{s.port}/ext")
    ext.up()
    assert not ext.seed(1000).skipped and ext.seed(1000).skipped
    st = ext.status()
    assert st.kind == "external" and st.state == "running"
    assert st.facts is not None and st.facts.test_rows == 1000
    ext.reset()
    # a `test` table stackrace did not make is never replaced
    with ext.connection() as conn:
        query(conn, "CREATE TABLE test (x INT)")
    with pytest.raises(DbError, match="did not create"):
        ext.seed(1000)
    with pytest.raises(DbError, match="did not create"):
        ext.reset()
    with pytest.raises(DbError, match="private instance only"):
        ext.reset(wipe=True)
    wrong = ExternalDatabase(f"mysql://{s.user}:nope@127.0.0.1:{s.port}/ext")
    assert wrong.status().state == "unreachable"
    with pytest.raises(DbError, match="Access denied"):
        wrong.up()


def test_taken_port_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(DbError, match=f"port {port} on 127.0.0.1 is already in use"):
            ManagedMariaDB(tmp_path, port, scoped=True).up()


def test_missing_mariadbd_is_a_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    inst = ManagedMariaDB(tmp_path / "inst", free_port(), scoped=True, bindir=str(empty))
    with pytest.raises(DbError, match="mariadbd not found"):
        inst.up()


def test_failed_start_shows_the_log_tail(db: ManagedMariaDB) -> None:
    """A server that will not start: the error carries mariadbd's own words."""
    db.down()
    broken = ManagedMariaDB(
        db.paths.root, free_port(), scoped=True, extra_args=["--no-such-option=1"]
    )
    try:
        with pytest.raises(DbError) as err:
            broken.up()
        assert "exited with code" in str(err.value).splitlines()[0]
        assert "no-such-option" in err.value.log_tail
    finally:
        db.up()


def test_scoped_server_dies_with_its_owner(tmp_path: Path) -> None:
    """SIGKILL the owning process: PR_SET_PDEATHSIG stops the server (cleanly, SIGTERM)."""
    code = (
        "import sys, time\n"
        "from stackrace.db import ManagedMariaDB\n"
        f"db = ManagedMariaDB({str(tmp_path)!r}, {free_port()}, scoped=True)\n"
        "db.up()\n"
        "print(db.pid(), flush=True)\n"
        "time.sleep(120)\n"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
    )
    assert owner.stdout is not None
    pid = int(owner.stdout.readline())
    inst = ManagedMariaDB(tmp_path)
    datadir = inst.paths.datadir
    try:
        assert is_our_server(pid, datadir)
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        deadline = time.monotonic() + 20
        while is_our_server(pid, datadir) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not is_our_server(pid, datadir)
    finally:
        inst.reset(wipe=True)  # ~110 MB, maybe outside tmp_path (the server's own dir)


def test_cli_service_outlives_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STACKRACE_DB_DIR", str(tmp_path))
    port = free_port()
    inst = ManagedMariaDB(tmp_path)
    try:
        # a separate process, so "outlives" is real: the command exits, the server stays
        rc = subprocess.run(
            [*CLI, "db", "up", "--port", str(port)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert rc.returncode == 0, rc.stderr
        assert inst.is_running() and inst.settings.port == port
        assert main(["db", "seed", "--rows", "1000"]) == 0
        assert main(["db", "status"]) == 0
        out = capsys.readouterr().out
        assert "seeded 1,000 rows" in out and "query cache" in out and "OFF" in out
        assert main(["db", "env"]) == 0
        assert f"export STACKRACE_DB_PORT={port}" in capsys.readouterr().out
        assert main(["db", "status", "--db", "postgres://x@127.0.0.1/db"]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "scheme must be mysql://" in err
        assert main(["db", "down"]) == 0
        assert not inst.is_running()
    finally:
        inst.reset(wipe=True)


async def test_async_scoped_instance(tmp_path: Path) -> None:
    """bench's path: start from the event loop, seed in a worker thread, stop on exit."""
    async with ManagedMariaDB(tmp_path, free_port(), scoped=True) as db:
        settings = await db.ensure_ready_async(rows=1000)
        assert db.owns_server and settings.port == db.settings.port
        pid = db.pid()
        assert pid is not None
        assert (await db.ensure_ready_async(rows=1000)) == settings  # all skipped now
        datadir = db.paths.datadir
    assert not is_our_server(pid, datadir)
    db.reset(wipe=True)


def test_port_in_use() -> None:
    """A port with a listener on it is in use."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert port_in_use(s.getsockname()[1])


def test_instances_made_at_once_keep_their_temporary_tables_apart(tmp_path: Path) -> None:
    """Three instances installed at the same moment (test lanes, two users' runs): each
    server and its install use a temporary directory of their own. In the shared /tmp,
    concurrent installs collided on their temporary tables (2 of 12 failed on a busy
    2-core machine: "Unknown table 'mysql.tmp_user_sys'")."""
    from concurrent.futures import ThreadPoolExecutor

    import psutil

    insts = [ManagedMariaDB(tmp_path / f"m{i}", free_port(), scoped=True) for i in range(3)]
    try:
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(lambda m: m.up(), insts))
        for m in insts:
            assert m.paths.tmp_dir.is_dir() and m.paths.tmp_dir.parent == m.paths.server_dir
            pid = int(m.paths.pid_file.read_text())
            assert f"--tmpdir={m.paths.tmp_dir}" in psutil.Process(pid).cmdline()
    finally:
        for m in insts:
            m.reset(wipe=True)
