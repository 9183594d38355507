"""The hardening suite: bad inputs, faults and security, with real processes only.

Every test here runs the real thing — the `stackrace` CLI in a subprocess, real servers on
127.0.0.1, a real private MariaDB — and checks a promise of docs/development.md, "Guarantees".
"""

from __future__ import annotations

import os
import pwd
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from stackrace.db import ManagedMariaDB
from tests.helpers import TestServer, free_port

PROBE_USER = "stackrace-probe"  # a local non-root user, made by the tests that need one

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root: makes a local user, or runs the server as mysql"
)


@pytest.fixture(scope="module")
def idle_server() -> Iterator[TestServer]:
    """One test server for the module's refusals, never loaded: each checks that nothing
    reached it, so a request sent by any of them fails it (a server a test cost ~0.1 CPU-s
    to start)."""
    s = TestServer()
    yield s
    s.kill()


def assert_one_line_error(r: subprocess.CompletedProcess[str], *words: str, rc: int = 2) -> str:
    """A refusal: the exit status, one line on stderr holding `words`, no traceback."""
    err = r.stderr
    assert r.returncode == rc, (r.returncode, r.stdout, err)
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


@pytest.fixture
def private_db(tmp_path: Path) -> Iterator[ManagedMariaDB]:
    """A private MariaDB of the test's own (scoped), wiped afterwards: its server files
    may live outside tmp_path (see stackrace.db.paths), so a wipe is needed."""
    db = ManagedMariaDB(tmp_path / "db", free_port(), scoped=True)
    try:
        yield db
    finally:
        db.reset(wipe=True)


@pytest.fixture(scope="session")
def probe_user() -> pwd.struct_passwd:
    """A local non-root account (made with useradd when missing; kept afterwards, since
    another test run on the machine may be using it)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to make a local non-root user")
    try:
        return pwd.getpwnam(PROBE_USER)
    except KeyError:
        pass
    r = subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PROBE_USER],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        return pwd.getpwnam(PROBE_USER)
    except KeyError:
        pytest.skip(f"cannot make a local user: {r.stderr.strip()}")
