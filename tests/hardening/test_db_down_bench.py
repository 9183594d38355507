"""A database that dies during `bench --workload db` is named, not blamed on the stacks.

A real private MariaDB is killed (SIGKILL) while the first stack is measured: the levels
measured while it was down are marked `db_down` and left out of the verdict, the next
stack is not started against the dead database, the run notes what happened and the
command exits non-zero.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from stackrace.db import ManagedMariaDB
from stackrace.report.schema import loads
from tests.conftest_stacks import real_stack
from tests.helpers import CLI, ROOT, free_port

pytestmark = pytest.mark.slow


def test_a_dead_database_is_named_and_its_levels_are_not_judged(tmp_path: Path):
    real_stack("uvicorn")
    real_stack("gunicorn-sync")
    root = tmp_path / "db"
    db = ManagedMariaDB(root, free_port())
    try:
        db.ensure_ready()  # up and seeded before the bench: it reuses this server
        out = tmp_path / "run.json"
        proc = subprocess.Popen(
            [
                *CLI, "bench",
                "--stacks", "uvicorn,gunicorn-sync", "--isolation", "rotate",
                "--workload", "db", "--queries", "1", "--concurrency", "2,4,8",
                "--duration", "1.5s", "--warmup", "0.2s", "--json", str(out),
            ],
            stderr=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "STACKRACE_DB_DIR": str(root)},
        )  # fmt: skip
        assert proc.stderr is not None
        seen = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            seen.append(line)
            if "uvicorn" in line and "c=2 " in line:  # the first level is measured
                break
        pid = db.pid()
        assert pid is not None, "".join(seen)
        os.kill(pid, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=180)
        err = "".join(seen) + stderr
        assert proc.returncode == 1, err
        assert "database" in err and "Traceback" not in err
        run = loads(out.read_bytes())
        by = {s.name: s for s in run.stacks}
        uvicorn = by["uvicorn"]
        assert not uvicorn.levels[0].db_down
        assert any(lv.db_down for lv in uvicorn.levels[1:]), [lv.db_down for lv in uvicorn.levels]
        # the verdict rests only on what was measured with a database
        assert uvicorn.breaking_point in (None, 2)
        # the second stack was not started against a dead database
        sync = by["gunicorn-sync"]
        assert sync.error and "database" in sync.error and not sync.levels
        assert any("database down" in n for n in run.notes)
    finally:
        db.reset(wipe=True)


def test_tables_dropped_during_a_db_bench_are_a_database_fault(tmp_path: Path):
    """The issue's case: `stackrace db reset` during `bench --workload db` was blamed on the
    stack ("failing at 4"), exit 0. Now the levels measured without the table are marked
    and not judged, the run names the database and exits 1, and JUnit files those
    levels as database errors, not as the stack's failures."""
    real_stack("uvicorn")
    root = tmp_path / "db"
    db = ManagedMariaDB(root, free_port())
    env = {**os.environ, "STACKRACE_DB_DIR": str(root)}
    try:
        db.ensure_ready()
        out, junit = tmp_path / "run.json", tmp_path / "junit.xml"
        proc = subprocess.Popen(
            [
                *CLI, "bench",
                "--stacks", "uvicorn", "--workload", "db", "--queries", "1",
                "--concurrency", "2,4,8", "--duration", "1.5s", "--warmup", "0.2s",
                "--json", str(out), "--junit", str(junit),
            ],
            stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env,
        )  # fmt: skip
        assert proc.stderr is not None
        seen = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            seen.append(line)
            if "uvicorn" in line and "c=2 " in line:  # the first level is measured
                break
        reset = subprocess.run(
            [*CLI, "db", "reset"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60
        )
        assert reset.returncode == 0, reset.stderr
        _, stderr = proc.communicate(timeout=180)
        err = "".join(seen) + stderr
        assert proc.returncode == 1, err
        assert "Traceback" not in err and "database" in err
        run = loads(out.read_bytes())
        (uvicorn,) = run.stacks
        assert not uvicorn.levels[0].db_down
        assert all(lv.db_down for lv in uvicorn.levels[1:]), [lv.db_down for lv in uvicorn.levels]
        assert uvicorn.breaking_point in (None, 2)  # not "failing at 4"
        assert any(n.startswith("database damaged: table test is gone") for n in run.notes)
        xml = junit.read_text()
        assert 'type="database"' in xml and 'type="no success"' not in xml
    finally:
        db.reset(wipe=True)
