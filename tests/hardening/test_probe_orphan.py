"""The import probe leaves no orphan (issue 48, item 6): an app whose import
double-forks a daemon that keeps stdout open and sleeps once made the probe wait 60 s
("took longer than 60s") and left the daemon running under init. Now the probe runs in
a session of its own with the stacks' clean-up (stackrace.supervise.sweep), its output
goes to files read once it exits, and the daemon is killed with it. A real interpreter,
a real daemon; its pid is read from a file it writes."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import pytest

from stackrace.stacks.app_probe import inspect_app
from stackrace.stacks.app_spec import AppError, AppSpec

DAEMON = textwrap.dedent(
    """
    import os, sys, time
    PIDFILE = {pidfile!r}
    if os.fork() == 0:
        {setsid}
        if os.fork() == 0:
            # the daemon: stdout and stderr stay the probe's, open; it sleeps
            with open(PIDFILE + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(PIDFILE + ".tmp", PIDFILE)
            time.sleep(300)
            os._exit(0)
        os._exit(0)
    deadline = time.time() + 10
    while not os.path.exists(PIDFILE) and time.time() < deadline:
        time.sleep(0.01)
    {tail}
    """
)


def _app(tmp_path: Path, *, setsid: bool, tail: str) -> tuple[AppSpec, Path]:
    pidfile = tmp_path / "daemon.pid"
    code = DAEMON.format(
        pidfile=str(pidfile), setsid="os.setsid()" if setsid else "pass", tail=tail
    )
    (tmp_path / "daemonapp.py").write_text(code)
    return AppSpec(target="daemonapp:app", app_dir=tmp_path, python=sys.executable), pidfile


def _gone(pid: int, within: float = 10.0) -> bool:
    """The process is gone, or a zombie its new parent has yet to reap (it runs no more)."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            return True
        if stat[stat.rfind(b")") + 2 :][:1] == b"Z":
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("setsid", [False, True], ids=["same-session", "own-session"])
def test_a_daemon_started_by_the_import_is_killed_and_not_waited_for(
    tmp_path: Path, setsid: bool
) -> None:
    app, pidfile = _app(tmp_path, setsid=setsid, tail="def app(environ, start_response): pass")
    t0 = time.monotonic()
    found = inspect_app(app, ["wsgiref"], timeout=60)
    took = time.monotonic() - t0
    # a busy CI machine starts an interpreter in well under 15 s; the old probe waited 60
    assert took < 30, f"the probe waited on the daemon's stdout: {took:.1f}s"
    assert found.interface == "wsgi"
    pid = int(pidfile.read_text())
    assert _gone(pid), f"the daemon {pid} outlived the import probe"


def test_an_import_that_hangs_is_cut_at_the_timeout_with_its_daemon(tmp_path: Path) -> None:
    app, pidfile = _app(tmp_path, setsid=True, tail="time.sleep(300)")
    t0 = time.monotonic()
    with pytest.raises(AppError, match="took longer than 3s"):
        inspect_app(app, [], timeout=3)
    assert time.monotonic() - t0 < 20
    pid = int(pidfile.read_text())
    assert _gone(pid), f"the daemon {pid} outlived the import probe"
