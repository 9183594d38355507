"""One line, never a traceback: a reader that goes away (`stackrace stacks | head`) is a
quiet exit; a home that cannot be written is one line naming the directory; `install
--into` runs only a real Python, never a program of the current directory; the crash
log's fallback in the shared temp directory is never a planted link. The real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.hardening.conftest import assert_one_line_error
from tests.hardening.test_package_tidy import clean_env, run_alone
from tests.helpers import CLI, ROOT

pytestmark = pytest.mark.slow


def test_a_reader_that_goes_away_is_a_quiet_exit(tmp_path: Path) -> None:
    env = {**os.environ, "STACKRACE_HOME": str(tmp_path / "home")}
    for args in (["stacks"], ["stacks", "--json"], ["--help"]):
        stackrace = subprocess.Popen(
            [*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env
        )
        assert stackrace.stdout is not None and stackrace.stderr is not None
        stackrace.stdout.read(20)  # `| head -c 20`: then the reader is gone
        stackrace.stdout.close()
        err = stackrace.stderr.read().decode()
        stackrace.wait(60)
        assert stackrace.returncode in (0, 141), (args, stackrace.returncode, err)
        assert "internal error" not in err and "Traceback" not in err, err
        assert "Broken pipe" not in err and "BrokenPipe" not in err, err
    assert not (tmp_path / "home" / "cache" / "crashes").exists()  # no crash log per pipe


def test_a_home_that_cannot_be_written_is_one_line_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    home = blocker / "home"  # a file where the directory should be: as root or not
    env = clean_env(STACKRACE_HOME=str(home), HOME=str(tmp_path))  # its own home alone
    for args in (
        ["db", "up"],
        ["serve", "uvicorn"],
        ["bench", "--stacks", "uvicorn", "--duration", "1s"],
        ["--stacks", "uvicorn", "--go"],
    ):
        r = run_alone(env, *args)
        assert r.returncode not in (0, 70), (args, r.returncode, r.stderr)
        assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
        said = [line for line in r.stderr.splitlines() if str(blocker) in line]
        assert len(said) == 1, (args, r.stderr)


def test_install_into_runs_only_a_python(tmp_path: Path) -> None:
    here = tmp_path / "cwd"
    here.mkdir()
    mark = tmp_path / "PIP-RAN"
    for planted in ("pip", "pip.py"):  # what `/bin/sh -m pip` or a cwd on sys.path runs
        (here / planted).write_text(f"#!/bin/sh\ntouch {mark}\n")
        (here / planted).chmod(0o755)
    r = subprocess.run(
        [*CLI, "install", "--into", "/bin/sh", "gunicorn-sync"],
        cwd=here,
        capture_output=True,
        text=True,
        env={**os.environ, "STACKRACE_HOME": str(tmp_path / "home")},
        timeout=60,
    )
    assert_one_line_error(r, "--into /bin/sh", "not a Python interpreter")
    assert not mark.exists()
    r = subprocess.run(
        [*CLI, "install", "--into", sys.executable, "gunicorn-sync", "--dry-run"],
        cwd=here,
        capture_output=True,
        text=True,
        env={**os.environ, "STACKRACE_HOME": str(tmp_path / "home")},
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert f"{sys.executable} -I -m pip install" in r.stdout  # isolated: no ./pip.py
    assert not mark.exists()


_CRASH = "from stackrace.base import crashlog; print(crashlog.record(RuntimeError('x'), []))"


def test_the_crash_logs_fallback_is_never_a_planted_link(tmp_path: Path) -> None:
    """The cache cannot be written, so the log goes to /tmp/stackrace-crashes-UID: a link
    planted there by someone else is not followed, a directory open to others is closed."""
    base = tmp_path / "tmp"
    base.mkdir()
    victim = tmp_path / "victim"
    victim.mkdir()
    fallback = base / f"stackrace-crashes-{os.getuid()}"
    fallback.symlink_to(victim, target_is_directory=True)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = {**os.environ, "TMPDIR": str(base), "STACKRACE_HOME": str(blocker / "home")}
    r = subprocess.run(
        [sys.executable, "-c", _CRASH], env=env, capture_output=True, text=True, cwd=ROOT
    )
    assert r.stdout.strip() == "None", r.stdout  # no file written anywhere
    assert list(victim.iterdir()) == []
    fallback.unlink()
    fallback.mkdir(mode=0o755)
    fallback.chmod(0o755)
    r = subprocess.run(
        [sys.executable, "-c", _CRASH], env=env, capture_output=True, text=True, cwd=ROOT
    )
    log = Path(r.stdout.strip())
    assert log.parent == fallback and log.is_file()
    assert fallback.stat().st_mode & 0o077 == 0  # closed to others again
    assert log.stat().st_mode & 0o077 == 0
    assert tempfile.gettempdir()  # (the test's own TMPDIR was used, not the machine's)
