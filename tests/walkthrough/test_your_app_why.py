"""The team's own app says which of its functions breaks first, under each server:
`stackrace bench --app app.py:app --path /slow --stacks 'gunicorn-gthread[app],…'`,
walked as a team runs it — its own Flask app in its own directory (production
settings: no debug, no reloader), one route holding a process-wide lock across a 5 ms
write to its stock service, one blocking 10 ms in a call to its pricing backend.

Under gunicorn gthread (one worker, eight threads) the threads queue on the lock: the
breaking-point line and the JSON say `lock` and name `hold_the_lock (app.py:N)`, the
app's own function and the line it was on. Under gunicorn sync (one worker, one thread) the backend
call is what one worker spends its time in: `blocking wait`, in `call_the_backend`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from stackrace.report.schema import loads
from tests.helpers import run_cli

pytestmark = pytest.mark.slow

TEAM_APP = '''"""The team's shop (Flask), as it runs in production: no debug, no reloader."""

import threading
import time

from flask import Flask

app = Flask(__name__)
STOCK = threading.Lock()  # one process-wide lock around the stock service


def hold_the_lock() -> str:
    with STOCK:
        time.sleep(0.005)  # the stock service's write, made while holding the lock
    return "reserved"


def call_the_backend() -> str:
    time.sleep(0.010)  # the pricing backend answers in ~10 ms
    return "priced"


@app.get("/")
def index() -> str:
    return "shop"


@app.get("/slow")
def slow() -> str:
    return hold_the_lock()


@app.get("/price")
def price() -> str:
    return call_the_backend()
'''


def _lines_of(function: str) -> range:
    """The lines of the team's function (a sample names the line it was on)."""
    lines = TEAM_APP.splitlines()
    first = next(i for i, text in enumerate(lines, 1) if text.startswith(f"def {function}("))
    return range(first, first + 4)


def _named(function: str, text: str) -> str:
    """`function (shop/app.py:N)` in `text` (the file as short as still unique, under
    the team's directory), N a line of that function: what was named."""
    m = re.search(rf"{function} \((?:shop/)?app\.py:(\d+)\)", text)
    assert m is not None, text
    assert int(m.group(1)) in _lines_of(function), (m.group(0), text)
    return m.group(0)


def _bench(tmp_path: Path, stack: str, path: str, out: Path) -> str:
    """The team's bench, on a quiet core (tests/helpers.py `take_quiet_core`): the
    question here is which function is named, and beside the other test lanes the
    engine, sharing the stack's core (`--share-cores`), once waited for a core half the
    time (3 ms a wake-up) and both levels were rightly "not judged: the engine was the
    limit" (reproduced beside a real-time spinner on that core)."""
    app_dir = tmp_path / "shop"
    app_dir.mkdir(exist_ok=True)
    (app_dir / "app.py").write_text(TEAM_APP)
    r = run_cli(
        "bench", "--app", f"{app_dir}/app.py:app", "--stacks", stack, "--path", path,
        "--concurrency", "1,32", "--duration", "2s", "--warmup", "0.5s",
        "--json", str(out), "--share-cores",
        timeout=240, cwd=tmp_path, quiet_core=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def _said(stdout: str, stack: str) -> str:
    """The stack's breaking-point line ("gunicorn-sync[app]: queueing at c=32 …") and
    what follows it, joined (a long line wraps)."""
    text = re.sub(r"\s+", " ", stdout)
    m = re.search(rf"{re.escape(stack)}: [a-z]+ at c=\d+", text)
    assert m is not None, stdout
    return text[m.start() :]


def test_a_lock_in_the_team_s_own_function_is_named_under_gthread(tmp_path: Path) -> None:
    out = tmp_path / "gthread.json"
    stdout = _bench(tmp_path, "gunicorn-gthread[app]", "/slow", out)
    run = loads(out.read_bytes())
    (st,) = run.stacks
    assert st.breaking_point is not None, stdout
    why = next(lv.why for lv in st.levels if lv.why is not None)
    assert why.cause.kind.value == "lock", (why.cause, why.window.states)
    assert why.cause.function is not None and why.cause.function.function == "hold_the_lock"
    where = _named("hold_the_lock", why.cause.sentence)
    raw = json.loads(out.read_text())
    kept = [lv["why"] for lv in raw["stacks"][0]["levels"] if lv.get("why")]
    assert kept and kept[0]["cause"]["kind"] == "lock"
    # the breaking-point line, as the team reads it, with the knob
    said = _said(stdout, "gunicorn-gthread[app]")
    assert "why: lock" in said and where in said, stdout


def test_a_backend_call_in_the_team_s_own_function_is_named_under_sync(tmp_path: Path) -> None:
    out = tmp_path / "sync.json"
    stdout = _bench(tmp_path, "gunicorn-sync[app]", "/price", out)
    run = loads(out.read_bytes())
    (st,) = run.stacks
    assert st.breaking_point == 32, st.breaking_reason
    why = next(lv.why for lv in st.levels if lv.why is not None)
    assert why.cause.kind.value == "blocking wait", (why.cause, why.window.states)
    where = _named("call_the_backend", why.cause.sentence)
    said = _said(stdout, "gunicorn-sync[app]")
    assert "why: blocking wait" in said and where in said, stdout
