"""The team's production settings race first time (issue 37).

A Django project set as for production (tests/apps/prodsite: DEBUG=False,
ALLOWED_HOSTS=["myapp.example.com"]) answers 400 to any other Host. Raced with
`-H 'Host: myapp.example.com'`, the readiness probe sends that header too, so it races
under gunicorn and uWSGI as `load` would load it; raced without it, each server's 400
is one line naming the status, the page's text (no HTML) and the likely cause, at once
(uWSGI's 400 ends at the connection's close: valid HTTP, read as complete, where
readiness used to retry it for 30 s). A close-delimited answer at readiness, a 200 and a
400, is checked without Django too (tests/servers/close_delimited.py).
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stackrace.report.schema import loads
from tests.helpers import ROOT, run_cli

PRODSITE = ROOT / "tests" / "apps" / "prodsite"
CLOSER = ROOT / "tests" / "servers" / "close_delimited.py"
SERVERS = "gunicorn-sync[app],uwsgi[app]"
QUICK = ("--concurrency", "2", "--duration", "1s", "--warmup", "0.3s", "--no-progress")

needs_django = pytest.mark.skipif(
    importlib.util.find_spec("django") is None
    or importlib.util.find_spec("gunicorn") is None
    or shutil.which("uwsgi", path=str(Path(sys.executable).parent)) is None,
    reason="Django, gunicorn and uWSGI are not installed here (scripts/setup.sh installs them)",
)


def _bench(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    t0 = time.monotonic()
    r = run_cli(
        "bench", "--app", "prodsite.wsgi:application", "--app-dir", str(PRODSITE),
        "--stacks", SERVERS, *QUICK, *args, timeout=240,
    )  # fmt: skip
    return r, time.monotonic() - t0


@needs_django
def test_production_settings_race_under_gunicorn_and_uwsgi(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    r, _ = _bench(
        "-H", "Host: myapp.example.com", "--path", "/:3", "--path", "/items:1",
        "--json", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    run = loads(out.read_bytes())
    assert [st.name for st in run.stacks] == ["gunicorn-sync[app]", "uwsgi[app]"]
    for st in run.stacks:
        assert not st.error, (st.name, st.error)
        for p in st.paths:  # every request answered as the app's own host: no 400
            assert p.answered > 0 and p.failed == p.errors == 0, (st.name, p)
            assert set(p.status) == {200}, (st.name, p.status)


@needs_django
def test_without_its_host_each_server_says_why_in_one_line_at_once() -> None:
    r, seconds = _bench("--path", "/")
    assert r.returncode == 1, r.stdout + r.stderr
    err = r.stderr
    for name in ("gunicorn-sync[app]", "uwsgi[app]"):
        line = next((x for x in err.splitlines() if x.startswith(f"stackrace bench: {name}")), "")
        assert 'answered 400 "Bad Request (400)", not 200-399' in line, err
        assert "the app may reject the Host header: set -H 'Host: …' or its allowed hosts" in line
        assert "<" not in line, line  # the page's text, not its markup
        assert err.count(f"{name}: ") == 1, err  # once, not four times
    # uWSGI's close-delimited 400 is an answer: no 30 s of retries before it is said
    assert seconds < 25, seconds


@needs_django
def test_a_host_it_does_not_serve_is_named_in_the_hint() -> None:
    r, _ = _bench("-H", "Host: other.example.com", "--path", "/")
    assert r.returncode == 1
    assert "the app may reject the Host header 'other.example.com': check its allowed hosts" in (
        r.stderr
    )


def test_readiness_reads_an_answer_that_ends_at_the_close() -> None:
    """A 200 and a 400 whose bodies end where the connection does (no length, not
    chunked, `Connection: close`): the 200 is ready and raced, the 400 is said at once
    with its page's text. Before, both were "connection closed before the response was
    complete", retried until the ready timeout (20 s)."""
    t0 = time.monotonic()
    r = run_cli(
        "bench", "--path", "/",
        "--cmd", f"closes-ok={sys.executable} {CLOSER} {{port}} 200",
        "--cmd", f"closes-bad={sys.executable} {CLOSER} {{port}} 400",
        "--stacks", "closes-ok,closes-bad", *QUICK, timeout=120,
    )  # fmt: skip
    seconds = time.monotonic() - t0
    assert r.returncode == 1, r.stdout + r.stderr
    assert "closes-ok: not measured" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert 'closes-bad: not measured (GET / answered 400 "Bad Request (400)", not 200' in (
        r.stderr
    ), r.stderr
    assert "not ready within" not in r.stdout + r.stderr
    assert seconds < 18, seconds
