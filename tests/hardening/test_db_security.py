"""The private MariaDB is never reachable without its password, never root where there is
a mysql account, writes files only in its own directory, and keeps no foreign account."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pymysql
import pytest

from stackrace.db import ManagedMariaDB
from stackrace.db.admin import connect, query
from stackrace.db.paths import find_binary
from stackrace.db.proc import is_our_server
from stackrace.db.provision import expected_accounts
from tests.hardening.conftest import needs_root
from tests.helpers import free_port, needs_mariadb, run_cli, wait_for

pytestmark = needs_mariadb

PROBE = Path(__file__).parent / "probe_mariadb.py"
SYSTEM_PYTHON = "/usr/bin/python3"


def server_uid(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("\nUid:")[1].split()[1])  # the effective uid


def accounts(db: ManagedMariaDB) -> set[tuple[str, str]]:
    with db.admin_connection() as conn:
        return {
            (str(u), str(h)) for u, h in query(conn, "SELECT User, Host FROM mysql.global_priv")
        }


@pytest.fixture
def probe_kit() -> Iterator[Path]:
    """A directory the probe user can read, holding a copy of PyMySQL (pure Python):
    the venv's Python lives under /root here, out of that user's reach."""
    if not Path(SYSTEM_PYTHON).exists():
        pytest.skip("no system python3 for the probe user")
    kit = Path(tempfile.mkdtemp(prefix="stackrace-probe-kit-"))
    try:
        kit.chmod(0o755)
        shutil.copytree(Path(pymysql.__file__).parent, kit / "pymysql")
        shutil.copy(PROBE, kit / "probe.py")
        for p in kit.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        yield kit
    finally:
        shutil.rmtree(kit, ignore_errors=True)


@needs_root
def test_first_db_up_cannot_be_entered_by_a_local_user(
    tmp_path: Path, probe_user: pwd.struct_passwd, probe_kit: Path
) -> None:
    """The issue's attack: a local non-root user polls 127.0.0.1:PORT with passwordless
    root (and other trivial logins) while `stackrace db up` makes and starts a new
    instance. The first build let it in; now every attempt that reaches the server is
    refused, and nothing the attacker would have made exists."""
    port = free_port()
    stop = probe_kit / "stop"
    probe = subprocess.Popen(
        [SYSTEM_PYTHON, str(probe_kit / "probe.py"), str(port), str(probe_kit), str(stop)],
        user=probe_user.pw_uid,
        group=probe_user.pw_gid,
        extra_groups=[],
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "HOME": "/"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    root = tmp_path / "db"
    db = ManagedMariaDB(root)
    try:
        assert probe.stdout is not None
        assert probe.stdout.readline().strip() == "polling"
        up = run_cli("db", "up", "--dir", str(root), "--port", str(port))
        assert up.returncode == 0, up.stderr
        time.sleep(0.5)  # keep polling the running server a little
        stop.touch()
        out, _ = probe.communicate(timeout=30)
        result = json.loads(out)
        assert result["got_in"] == [], result["got_in"]
        # the probe was really there: it found no server at first, then a server that
        # answered "access denied" — it polled across the whole start
        assert result["no_server"] > 0 and result["denied"] > 0, result
        assert not list(Path("/tmp").glob(f"stackrace-probe-{port}-*.txt"))
        assert accounts(db) <= expected_accounts("stackrace")
        # nor can that user reach the server's socket: its directory is the server's own
        sock = db.settings.socket
        r = subprocess.run(
            [
                SYSTEM_PYTHON,
                "-c",
                f"import socket; socket.socket(socket.AF_UNIX).connect({sock!r})",
            ],
            user=probe_user.pw_uid,
            group=probe_user.pw_gid,
            extra_groups=[],
            cwd="/",
            capture_output=True,
            text=True,
            check=False,
        )
        assert r.returncode != 0 and "PermissionError" in r.stderr, r.stderr
    finally:
        if probe.poll() is None:
            probe.kill()
            probe.wait()
        db.reset(wipe=True)


def test_outfile_is_confined_and_the_server_is_not_root(private_db: ManagedMariaDB) -> None:
    """Even with the root password, `SELECT … INTO OUTFILE` cannot write outside the
    instance's own directory; what it writes there belongs to the server's account."""
    private_db.up()
    pid = private_db.pid()
    assert pid is not None
    files = private_db.paths.files_dir
    outside = Path(tempfile.gettempdir()) / f"stackrace-outfile-{os.getpid()}.txt"
    with private_db.admin_connection() as conn:
        assert query(conn, "SELECT @@secure_file_priv")[0][0] == f"{files}/"
        for target in (outside, private_db.root / "x.txt", Path("/etc/stackrace-x")):
            with pytest.raises(Exception, match="secure-file-priv"):
                query(conn, f"SELECT 'x' INTO OUTFILE '{target}'")
            assert not target.exists()
        query(conn, f"SELECT 'x' INTO OUTFILE '{files / 'ok.txt'}'")
    if os.geteuid() == 0:
        mysql = pwd.getpwnam("mysql").pw_uid  # the mariadb-server package makes it
        assert server_uid(pid) == mysql
        assert (files / "ok.txt").stat().st_uid == mysql
        st = private_db.paths.server_dir.stat()
        assert st.st_uid == mysql and st.st_mode & 0o077 == 0
    assert private_db.status().run_as


def test_no_foreign_account_survives(private_db: ManagedMariaDB) -> None:
    """A fresh instance has exactly the accounts it needs (mariadb-install-db's root@
    127.0.0.1, root@::1, root@hostname and anonymous users are gone before the first
    start), and an account made later — here with the root password, with every
    privilege — is dropped by the next `up`."""
    private_db.up()
    assert accounts(private_db) == expected_accounts("stackrace") - {("PUBLIC", "")}
    with private_db.admin_connection() as conn:
        query(conn, "CREATE USER 'intruder'@'%' IDENTIFIED BY 'x'")
        query(conn, "GRANT ALL PRIVILEGES ON *.* TO 'intruder'@'%' WITH GRANT OPTION")
    private_db.up()  # running: reused, and its accounts checked again
    assert ("intruder", "%") not in accounts(private_db)
    assert any("intruder" in n for n in private_db.notes)
    s = private_db.settings
    with pytest.raises(Exception, match="Access denied"):
        connect(s, user="intruder", password="x", via_socket=False)


def test_instance_made_by_the_first_build_is_remade(tmp_path: Path) -> None:
    """An instance the first build made (and ran: first start reachable without a
    password, a foreign account planted) is stopped, deleted and made again."""
    root = tmp_path / "old"
    datadir = root / "data"
    port = free_port()
    root.mkdir(mode=0o700)
    user = ["--user=root"] if os.geteuid() == 0 else []
    subprocess.run(
        [
            str(find_binary("mariadb-install-db")),
            "--no-defaults",
            f"--datadir={datadir}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            *user,
        ],
        check=True,
        capture_output=True,
    )
    (root / "instance.json").write_bytes(
        msgspec.json.encode(
            {"port": port, "password": "p", "admin_password": "", "provisioned": True}
        )
    )
    old = subprocess.Popen(
        [
            str(find_binary("mariadbd")),
            "--no-defaults",
            *user,
            f"--datadir={datadir}",
            f"--socket={root / 'mariadbd.sock'}",
            f"--pid-file={root / 'mariadbd.pid'}",
            f"--port={port}",
            "--bind-address=127.0.0.1",
            "--skip-name-resolve",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    db = ManagedMariaDB(root, scoped=True)
    try:

        def plant() -> bool:
            try:
                c = pymysql.connect(host="127.0.0.1", port=port, user="root", password="")
            except pymysql.MySQLError:
                return False
            with c, c.cursor() as cur:
                cur.execute("CREATE USER 'intruder'@'%' IDENTIFIED BY 'x'")
                cur.execute("GRANT ALL PRIVILEGES ON *.* TO 'intruder'@'%' WITH GRANT OPTION")
            return True

        assert wait_for(plant, 30), "the old-style server did not start"
        db.up()
        assert old.wait(timeout=30) is not None  # the old server was stopped
        assert not datadir.exists()
        assert ("intruder", "%") not in accounts(db)
        assert any("earlier stackrace" in n for n in db.notes)
        pid = db.pid()
        assert pid is not None and is_our_server(pid, db.paths.datadir)
        with pytest.raises(Exception, match="Access denied"):
            connect(db.settings, user="root", password="", via_socket=False)
    finally:
        if old.poll() is None:
            old.kill()
            old.wait()
        db.reset(wipe=True)


@needs_root
def test_without_a_mysql_user_it_runs_as_root_and_says_so(tmp_path: Path) -> None:
    db = ManagedMariaDB(tmp_path / "db", free_port(), scoped=True, run_as="no-such-user-x")
    try:
        db.up()
        pid = db.pid()
        assert pid is not None and server_uid(pid) == 0
        assert any("runs as root" in n and "no-such-user-x" in n for n in db.notes)
        st = db.status()
        assert st.run_as == "root" and any("runs as root" in n for n in st.notes)
        # still confined to its own directory
        with db.admin_connection() as conn, pytest.raises(Exception, match="secure-file-priv"):
            query(conn, "SELECT 'x' INTO OUTFILE '/tmp/stackrace-as-root.txt'")
    finally:
        db.reset(wipe=True)
