"""Your app on every server (README and docs/your-app.md): the examples under real servers via
`bench --app`, per-path counts against the app's own, failures that fail, `--cmd`, a
user's stacks file, and the app's own interpreter (`--python`, a venv made here)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import venv
from collections import Counter
from pathlib import Path

import pytest

from stackrace.report.schema import BenchRun, loads
from tests.helpers import CLI, ROOT, run_cli

EXAMPLES = ROOT / "examples"
# Half a second of load after a tenth of warm-up: what these tests check is counted
# exactly (drained: every request sent answered, and seen by the app) or is a failure
# that shows in the first requests; none checks a throughput.
QUICK = ("--concurrency", "4", "--duration", "0.5s", "--warmup", "0.1s", "--no-progress")


def _segments(log: Path) -> list[Counter[str]]:
    """The example app's request log ("METHOD PATH AGENT" lines), cut into one segment
    per server: with `--isolation rotate` each server's readiness probes come first,
    then its load, drained before the next server starts."""
    segments: list[Counter[str]] = []
    probing = False
    for line in log.read_text().splitlines():
        method, path, agent = line.split(" ")
        if agent == "stackrace-probe":
            if not probing:
                segments.append(Counter())
            probing = True
            continue
        probing = False
        assert agent == "stackrace", line
        segments[-1][f"{method} {path}"] += 1
    return segments


def _bench_app(
    tmp_path: Path, app: str, stacks: str, *extra: str
) -> tuple[BenchRun, list[Counter[str]]]:
    log = tmp_path / "requests.log"
    out = tmp_path / "run.json"
    r = run_cli(
        "bench",
        *("--app", str(EXAMPLES / app), "--stacks", stacks),
        *("--path", "/:3", "--path", "/slow:1", "--isolation", "rotate"),
        *("--env", f"EXAMPLE_REQUEST_LOG={log}", "--json", str(out)),
        *QUICK,
        *extra,
        cwd=tmp_path,  # a shell in another directory, as the README's user
        timeout=240,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return loads(out.read_bytes()), _segments(log)


def _check_counts(run: BenchRun, segments: list[Counter[str]]) -> None:
    assert len(segments) == len(run.stacks)
    for st, seen in zip(run.stacks, segments, strict=True):
        assert not st.error, st.error
        by_path = {p.name: p for p in st.paths}
        assert set(by_path) == {"/", "/slow"}
        for name, p in by_path.items():
            # drained before the stop: every request sent was answered, and the app saw
            # exactly those (its own count, from every worker process)
            assert p.sent == p.answered > 0 and p.failed == p.waiting == p.errors == 0
            assert seen[f"GET {name}"] == p.answered, (st.name, name, seen)
        # the weights: three of / for one of /slow, exact over each turn of the sequence
        assert abs(by_path["/"].sent - 3 * by_path["/slow"].sent) <= 3


@pytest.mark.slow
def test_flask_example_under_three_servers_counts_what_the_app_counts(tmp_path: Path) -> None:
    run, segments = _bench_app(
        tmp_path, "flask_app:app", "gunicorn-sync[app],gunicorn-gevent[app],uwsgi[app]:workers=2"
    )
    assert [s.name for s in run.stacks] == [
        "gunicorn-sync[app]",
        "gunicorn-gevent[app]",
        "uwsgi[app]:workers=2",
    ]
    assert run.settings.kinds == ["/ ×3", "/slow ×1"]
    _check_counts(run, segments)
    # the level's own window splits its requests by kind too
    w = run.stacks[0].levels[0].window
    assert w.kinds is not None and sum(k.answered for k in w.kinds) == w.requests


@pytest.mark.slow
def test_fastapi_example_under_uvicorn_and_granian(tmp_path: Path) -> None:
    run, segments = _bench_app(tmp_path, "fastapi_app:app", "uvicorn[app],granian-asgi[app]")
    _check_counts(run, segments)


@pytest.mark.slow
def test_a_path_that_answers_404_fails_the_run(tmp_path: Path) -> None:
    junit = tmp_path / "j.xml"
    r = run_cli(
        "bench",
        *("--app", str(EXAMPLES / "flask_app:app"), "--stacks", "gunicorn-sync[app]"),
        *("--path", "/:3", "--path", "/missing:1", "--junit", str(junit)),
        *QUICK,
        cwd=tmp_path,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "stackrace bench: gunicorn-sync[app] /missing: no expected answer" in r.stderr
    assert 'failures="1"' in junit.read_text()
    # ... unless the expected status says otherwise
    r = run_cli(
        "bench",
        *("--app", str(EXAMPLES / "flask_app:app"), "--stacks", "gunicorn-sync[app]"),
        *("--path", "/missing", "--expect-status", "404"),
        *QUICK,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no expected answer" not in r.stderr and "every request failed" not in r.stderr


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_cmd_adds_a_node_one_liner_as_a_stack(tmp_path: Path) -> None:
    server = "require('http').createServer((q,s)=>s.end('hi')).listen(+process.argv[1],'127.0.0.1')"
    r = run_cli(
        "bench",
        *("--cmd", f'node-hi=node -e "{server}" {{port}}', "--path", "/"),
        *QUICK,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "node-hi" in r.stdout
    # its command is split as words and its placeholders checked like a stacks file's
    r = run_cli("bench", "--cmd", "bad=node {prot}", "--path", "/", *QUICK, cwd=tmp_path)
    assert r.returncode == 2 and "unknown placeholder {prot}" in r.stderr


def test_a_users_stacks_file_adds_to_the_shipped_one(tmp_path: Path) -> None:
    (tmp_path / "stacks.toml").write_text(
        '[stacks.mine]\ncommand = ["{python}", "-m", "http.server", "{port}"]\n'
    )
    r = run_cli("stacks", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    names = {row["name"]: row for row in json.loads(r.stdout)}
    assert "mine" in names and "uvicorn" in names and "gunicorn-sync" in names
    assert names["mine"]["family"] == "other" and names["mine"]["title"] == "mine"
    assert "shipped with stackrace" in r.stderr and "found in this directory" in r.stderr


def _tiny_wheel(where: Path) -> Path:
    """A local wheel of one module (pip installs it offline, with no build step)."""
    import zipfile

    path = where / "tinypkg-1.0-py3-none-any.whl"
    info = "tinypkg-1.0.dist-info"
    files = {
        "tinypkg/__init__.py": 'GREETING = "hello from a venv"\n',
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
        f"{info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path


TINY_APP = """
import tinypkg

def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [tinypkg.GREETING.encode()]
"""


@pytest.mark.slow
def test_the_app_runs_with_the_interpreter_of_its_own_virtualenv(tmp_path: Path) -> None:
    """A package only in a virtualenv made here: with --python, that venv's interpreter
    imports the app under gunicorn; without it, one clear line and nothing started."""
    env_dir = tmp_path / "appenv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    wheel = _tiny_wheel(tmp_path)
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )
    # the servers themselves: stackrace's venv's packages, reachable from the new venv
    site = next((env_dir / "lib").glob("python3*/site-packages"))
    ours = next(p for p in sys.path if p.endswith("site-packages") and str(ROOT) in p)
    (site / "stackrace-servers.pth").write_text(ours + "\n")
    app_dir = tmp_path / "myapp"
    app_dir.mkdir()
    (app_dir / "main.py").write_text(TINY_APP)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    common = ["bench", "--app", "main:app", "--stacks", "gunicorn-sync[app]", *QUICK]
    r = subprocess.run(
        [*CLI, *common], cwd=app_dir, env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2
    assert "No module named 'tinypkg'" in r.stderr and "--python" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = subprocess.run(
        [*CLI, *common, "--python", str(python)],
        cwd=app_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "gunicorn-sync[app]" in r.stdout
    # installing a server goes to that interpreter's pip, said so
    r = subprocess.run(
        [*CLI, "install", "--into", str(python), "--dry-run", "gunicorn-sync"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0 and f"$ {python} -I -m pip install" in r.stdout, r.stdout + r.stderr


@pytest.mark.slow
def test_verify_app_checks_each_path_and_counts_only_what_it_verified(tmp_path: Path) -> None:
    """`verify --app`: each path's status on each server, a 404 is a problem naming the
    path; a server not installed where the app runs is neither verified nor failed
    (it once said "9 of 9 stacks verified" with three not installed), and none at all
    installed is a failure naming the install command."""
    r = run_cli(
        "verify", "--app", str(EXAMPLES / "flask_app:app"), "gunicorn-sync[app]",
        "--path", "/", "--path", "/items/3", "--path", "/nothere", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert "/nothere: answered 404, expected 2xx" in r.stdout
    assert "0 of 1 stacks verified" in r.stderr
    # an environment with no server in it (a bare venv) and an app needing nothing
    env = tmp_path / "bare"
    venv.create(env, with_pip=False)
    app_dir = tmp_path / "plain"
    app_dir.mkdir()
    (app_dir / "main.py").write_text(
        "def app(environ, start_response):\n"
        "    start_response('200 OK', [('Content-Type', 'text/plain')])\n"
        "    return [b'ok']\n"
    )
    python = env / "bin" / "python"
    r = run_cli("verify", "--app", "main:app", "--python", str(python), cwd=app_dir)
    assert r.returncode == 1, r.stdout + r.stderr
    assert re.search(r"0 of (\d+) stacks verified, \1 not installed", r.stderr), r.stderr
    assert f"stackrace install --into {python} gunicorn-sync" in r.stderr
