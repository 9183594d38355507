"""The database stops when asked: Ctrl-C on `stackrace db seed` stops the INSERT on the
server (KILL QUERY), says in one line what table `test` holds, and exits 130; the
server inserts no more and `db reset` does not wait behind it. A real private MariaDB,
the real CLI, a real SIGINT in the middle of a 50-million-row seed."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from stackrace.db import ManagedMariaDB
from tests.helpers import CLI, ROOT, needs_mariadb, run_cli

pytestmark = [pytest.mark.slow, needs_mariadb]


def _inserting(db: ManagedMariaDB) -> bool:
    with db.admin_connection() as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
            "WHERE INFO LIKE 'INSERT INTO test%'"
        )
        row = cur.fetchone()
        assert row is not None  # COUNT(*) has a row
        return bool(row[0])


def _rows(db: ManagedMariaDB) -> int:
    with db.admin_connection() as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM stackrace.test")
        row = cur.fetchone()
        assert row is not None
        return int(row[0])


@pytest.mark.parametrize("engine", ["myisam", "innodb"])
def test_ctrl_c_on_db_seed_stops_the_insert_on_the_server(
    private_db: ManagedMariaDB, engine: str
) -> None:
    private_db.up()
    seed = subprocess.Popen(
        [
            *CLI,
            "db",
            "seed",
            "--dir",
            str(private_db.root),
            "--rows",
            "50000000",
            "--engine",
            engine,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "STACKRACE_DB_DIR": str(private_db.root)},
    )
    try:
        end = time.monotonic() + 30
        while not _inserting(private_db) and time.monotonic() < end:
            time.sleep(0.1)
        assert _inserting(private_db), "the seed never started inserting"
        time.sleep(1.0)  # some rows in
        seed.send_signal(signal.SIGINT)
        out, err = seed.communicate(timeout=30)
    finally:
        if seed.poll() is None:
            seed.kill()
            seed.wait()
    assert seed.returncode == 130, (out, err)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "KILL QUERY" in lines[0] and "unfinished" in lines[0], lines[0]
    # the server stopped: nothing inserting, the count does not move
    assert not _inserting(private_db)
    before = _rows(private_db)
    assert f"holds {before:,} of 50,000,000 rows" in lines[0]
    time.sleep(1.0)
    assert _rows(private_db) == before
    assert before < 50_000_000
    status = run_cli("db", "status", "--dir", str(private_db.root))
    assert "INTERRUPTED" in status.stdout, status.stdout
    started = time.monotonic()
    r = run_cli("db", "reset", "--dir", str(private_db.root), timeout=30)
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - started < 15  # not behind a statement still running
