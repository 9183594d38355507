"""The package is honest and tidy: STACKRACE_HOME and XDG govern every file stackrace
touches, no database is started unasked, a taken port is never met with advice to use
an option the command lacks, and `stackrace clean` removes what stackrace made (and
nothing else). The CLI, a real MariaDB, real files and links."""

from __future__ import annotations

import ast
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from stackrace.base import madeby
from stackrace.base.paths import APPS_COPY
from stackrace.db import ManagedMariaDB
from stackrace.db.instance import LAYOUT, InstanceMeta
from stackrace.stacks.run_roots import RUN_MADE_FOR, RUNS_MADE_FOR
from tests.hardening.conftest import assert_one_line_error
from tests.helpers import CLI, ROOT, STACKS_FIXTURE, free_port, needs_mariadb, run_cli

SRC = ROOT / "src" / "stackrace"
HOME_VARIABLES = {"HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"}


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without any variable that says where stackrace's files go (the
    test session sets STACKRACE_DB_DIR: tests/conftest.py), plus `extra`."""
    ours = HOME_VARIABLES | {"STACKRACE_HOME", "STACKRACE_DB_DIR", "STACKRACE_RUNS_DIR"}
    env = {k: v for k, v in os.environ.items() if k not in ours}
    return {**env, **extra}


def run_alone(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with exactly `env` (run_cli() adds to this process's environment instead)."""
    return subprocess.run(
        [*CLI, *args], env=env, capture_output=True, text=True, cwd=ROOT, timeout=120, check=False
    )


def test_the_last_race_is_kept_where_stackrace_home_says(tmp_path: Path) -> None:
    """It went to ~/.config/stackrace whatever STACKRACE_HOME said: one user's last race
    became another's picker."""
    home, own = tmp_path / "home", tmp_path / "stackrace-home"
    home.mkdir()
    save = (
        "from stackrace.race.live.choices import Choices, save_choices; "
        "print(save_choices(Choices()))"
    )
    for env, expected in [
        (clean_env(HOME=str(home), STACKRACE_HOME=str(own)), own / "config" / "last-race.json"),
        (
            clean_env(HOME=str(home), XDG_CONFIG_HOME=str(tmp_path / "xdg")),
            tmp_path / "xdg" / "stackrace" / "last-race.json",
        ),
    ]:
        r = subprocess.run(
            [sys.executable, "-c", save], env=env, capture_output=True, text=True, check=True
        )
        assert r.stdout.strip() == str(expected) and expected.is_file()
    assert not list(home.rglob("*"))  # nothing under the real home


def test_only_paths_reads_the_home_and_xdg_variables() -> None:
    """One place decides where files go (stackrace.base.paths): no other module reads HOME,
    the XDG variables or Path.home(), so none can bypass STACKRACE_HOME."""
    offenders = []
    for f in SRC.rglob("*.py"):
        if f == SRC / "base" / "paths.py":
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Constant) and node.value in HOME_VARIABLES:
                offenders.append(f"{f.relative_to(SRC)}:{node.lineno}: {node.value!r}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "home"
            ):
                offenders.append(f"{f.relative_to(SRC)}:{node.lineno}: .home()")
    assert not offenders, offenders


def test_serve_and_verify_start_no_database_unless_asked(tmp_path: Path) -> None:
    """`serve`/`verify` of a stack that serves /db started (and seeded) the private
    MariaDB for /hello too. Without --db: no instance directory, no server, a note."""
    db_dir = tmp_path / "db"
    env = {"STACKRACE_DB_DIR": str(db_dir), "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen(
        [*CLI, "--stacks-file", str(STACKS_FIXTURE), "serve", "plain"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, **env},
    )
    assert proc.stdout is not None
    lines = [proc.stdout.readline() for _ in range(2)]
    assert lines[-1].startswith("serving"), lines
    proc.send_signal(2)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert not db_dir.exists()
    r = run_cli("--stacks-file", str(STACKS_FIXTURE), "verify", "plain", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "/db and /dbjson were not checked: add --db" in r.stdout
    assert not db_dir.exists() and not list(tmp_path.glob("stackrace-db-*"))


@pytest.fixture
def taken_port() -> Iterator[tuple[socket.socket, int]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        yield s, s.getsockname()[1]


def instance_on(root: Path, port: int) -> None:
    """An instance directory that only names its port (as the tests' default one)."""
    root.mkdir(mode=0o700)
    meta = InstanceMeta(port=port, password="", admin_password="", layout=LAYOUT)
    (root / "instance.json").write_bytes(msgspec.json.encode(meta))


@needs_mariadb
def test_a_taken_port_is_never_met_with_an_option_the_command_lacks(
    tmp_path: Path, taken_port: tuple[socket.socket, int]
) -> None:
    """The service (`db up`) says how to choose another port with the option it has; a
    database scoped to a command (bench, serve --db, the app) moves to a free port."""
    _, port = taken_port
    root = tmp_path / "db"
    instance_on(root, port)
    r = run_cli("db", "up", env={"STACKRACE_DB_DIR": str(root)})
    line = assert_one_line_error(r, f"stackrace db up: port {port} on 127.0.0.1", rc=1)
    assert "`stackrace db up --port PORT`" in line
    db = ManagedMariaDB(root, scoped=True)
    try:
        settings = db.up()
        assert settings.port != port
        assert any(f"port {port} on 127.0.0.1 is in use" in n for n in db.notes), db.notes
    finally:
        db.reset(wipe=True)


@needs_mariadb
def test_clean_stops_the_database_and_removes_only_what_stackrace_made(tmp_path: Path) -> None:
    home = tmp_path / "stackrace-home"
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious").write_text("keep me")
    env = clean_env(STACKRACE_HOME=str(home), HOME=str(tmp_path))
    db = ManagedMariaDB(home / "cache" / "mariadb", free_port())
    try:
        db.up()  # a real private MariaDB, running, as `stackrace db up` leaves it
        pid = db.pid()
        server_dir = db.paths.server_dir.resolve()  # maybe under /var/tmp (see db/paths.py)
        # made as stackrace makes them: marked (stackrace.madeby)
        madeby.make_dir(home / "cache" / "runs", RUNS_MADE_FOR)
        madeby.make_dir(home / "cache" / "runs" / "a-run", RUN_MADE_FOR)
        (home / "cache" / "runs" / "a-run" / "out").symlink_to(victim)  # inside: not followed
        madeby.make_dir(home / "data" / "apps", APPS_COPY)
        (home / "cache" / "crashes").symlink_to(victim)  # a known name, but a link out
        (home / "cache" / "mine.txt").write_text("the user's")  # not stackrace's
        (home / "config").mkdir()
        (home / "config" / "stacks.toml").write_text("")

        dry = run_alone(env, "clean", "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert f"would stop   the private MariaDB (pid {pid}" in dry.stdout
        for name in ("mariadb", "runs"):
            assert f"would remove {home / 'cache' / name}" in dry.stdout
        assert f"{home / 'cache' / 'crashes'}" in dry.stdout and "not followed" in dry.stdout
        assert "nothing changed (--dry-run)" in dry.stdout
        assert db.pid() == pid and (home / "cache" / "runs").exists()

        done = run_alone(env, "clean")
        assert done.returncode == 0, done.stdout + done.stderr
        assert db.pid() is None
        assert sorted(p.name for p in (home / "cache").iterdir()) == ["crashes", "mine.txt"]
        assert not (home / "data").exists() and not server_dir.exists()
        assert (home / "config" / "stacks.toml").exists()
        assert (victim / "precious").read_text() == "keep me"
        assert "removed " in done.stdout
    finally:
        db.reset(wipe=True)
