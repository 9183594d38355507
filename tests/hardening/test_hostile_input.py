"""Hostile and careless input (issue 21): no text from a variant, preset, stacks file or
run file becomes a path, a command or a listening address unchecked; tunables have
bounds; a second Ctrl-C means now; mistakes are one line and a non-zero exit.

Real processes and real files throughout: the CLI as a user runs it, real servers."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from stackrace.base import slug
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.definition import Stack
from stackrace.stacks.launcher import Launcher
from stackrace.stacks.variants import resolve
from tests.hardening.cli_forks import run_forked
from tests.hardening.test_launch_faults import pids_with
from tests.helpers import CLI, ROOT, STACKS_FIXTURE, free_port, wait_for
from tests.unit.test_hostile_values import HOSTILE_VALUES  # one list of hostile values


def _victim_beside_runs(tmp_path: Path) -> tuple[Path, Path]:
    """A runs directory two levels below `tmp_path` and a victim directory whose file a
    traversal from a run directory would reach (`runs/a/b/<root>/../../../victim`)."""
    runs = tmp_path / "runs" / "a" / "b"
    runs.mkdir(parents=True)
    victim = tmp_path / "victim" / "sub"
    victim.mkdir(parents=True)
    (victim / "data.txt").write_text("precious")
    return runs, victim / "data.txt"


@pytest.mark.parametrize("value", HOSTILE_VALUES)
def test_a_hostile_variant_value_is_refused_and_deletes_nothing(tmp_path: Path, value: str) -> None:
    runs, precious = _victim_beside_runs(tmp_path)
    env = {"STACKRACE_RUNS_DIR": str(runs)}
    r = run_forked("serve", "--no-db", f"uvicorn:db_pool={value}", env=env, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert "stack 'uvicorn:db_pool=" in line, line
    assert "key 'db_pool'" in line or "control characters" in line, line
    assert precious.read_text() == "precious"
    # a word-kind param (the proxy's backend) and a choice param are held the same way
    for ref in (f"nginx-proxy:backend={value}", f"php-fpm-nginx:opcache={value}"):
        r = run_forked("serve", "--no-db", ref, env=env, timeout=60)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "key '" in r.stderr or "control characters" in r.stderr, r.stderr
    assert precious.read_text() == "precious"


def test_a_preset_naming_hostile_variants_deletes_nothing(tmp_path: Path) -> None:
    runs, precious = _victim_beside_runs(tmp_path)
    evil = tmp_path / "evil.toml"
    evil.write_text(
        'description = "evil"\n'
        'stacks = ["uvicorn:db_pool=x/y", "uvicorn:db_pool=x/../../../victim"]\n'
        'concurrency = [1]\nduration = "1s"\nwarmup = "0s"\n'
    )
    r = run_forked("bench", "--preset", str(evil), env={"STACKRACE_RUNS_DIR": str(runs)})
    assert r.returncode == 2 and "key 'db_pool'" in r.stderr, r.stderr
    assert precious.read_text() == "precious"


async def test_a_run_directory_stays_inside_its_root_whatever_the_name(tmp_path: Path) -> None:
    """Below the validation: a Stack built by hand with a traversal in its name (as a
    bug or a future front end might) still gets a directory inside the run root, and
    nothing outside is removed or created."""
    _, precious = _victim_beside_runs(tmp_path)
    stacks = load_stacks(STACKS_FIXTURE)
    plain = resolve("plain", stacks)
    hostile = Stack(name="plain:x=/../../../../victim", base="plain", spec=plain.spec)
    # a short run root, so that the stack's own directory is in it (a long one would be
    # linked to a short directory in the temp dir: test_launch_faults covers that)
    root = Path(tempfile.mkdtemp(prefix="sr-"))
    async with Launcher(run_root=root) as launcher:
        rs = await launcher.start(hostile)
        assert rs.run_dir.parent == root and slug.is_safe(rs.run_dir.name)
        # started again in the same launcher: a new directory, the old one untouched
        (rs.run_dir / "keep.txt").write_text("log of the first start")
        await launcher.stop(rs)
        again = await launcher.start(hostile)
        assert again.run_dir != rs.run_dir and again.run_dir.parent == root
        assert (rs.run_dir / "keep.txt").exists()
    assert precious.read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs", "victim"]
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["a"]
    shutil.rmtree(root)


def test_the_cli_refuses_absurd_workers_at_once_and_says_how_to_lift() -> None:
    start = time.monotonic()
    r = run_forked("serve", "--no-db", "gunicorn-sync:workers=99999999999999999999")
    assert r.returncode == 2 and "ceiling" in r.stderr and "--no-tunable-limits" in r.stderr
    assert time.monotonic() - start < 20  # no worker was booted
    r = run_forked("stacks")
    assert "variants on this machine: workers <=" in r.stdout + r.stderr  # stderr in a pipe


@pytest.mark.parametrize(
    ("key", "value"),
    [("stop_timeout", "1e300"), ("ready_timeout", "3601"), ("stop_timeout", "nan")],
)
def test_timeouts_in_a_stacks_file_are_at_most_an_hour(
    tmp_path: Path, key: str, value: str
) -> None:
    stacks = tmp_path / "stacks.toml"
    stacks.write_text(
        STACKS_FIXTURE.read_text().replace(
            'title = "test server"', f'{key} = {value}\ntitle = "t"', 1
        )
    )
    r = run_forked("--stacks-file", str(stacks), "stacks")
    assert r.returncode == 2 and f"key '{key}'" in r.stderr, r.stderr


STUBBORN = """
[stacks.stubborn]
title = "ignores SIGTERM"
language = "python"
family = "sync"
stop_timeout = 3600.0
command = ["{python}", "-c", "CODE"]
"""
# a test server that ignores SIGTERM (MARK: a token to find its processes by)
CODE = (
    "import signal, runpy, sys; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "sys.argv = ['s', '{port}', '0', 'MARK']; "
    "runpy.run_path('{root}/tests/servers/testserver.py', run_name='__main__')"
)


@pytest.mark.slow
def test_a_second_ctrl_c_kills_a_stack_that_ignores_sigterm_at_once(tmp_path: Path) -> None:
    mark = f"stubborn-{uuid.uuid4().hex[:8]}"
    stacks = tmp_path / "stacks.toml"
    stacks.write_text(STUBBORN.replace("CODE", CODE).replace("MARK", mark))
    proc = subprocess.Popen(
        [*CLI, "--stacks-file", str(stacks), "serve", "--no-db", "stubborn"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "STACKRACE_RUNS_DIR": str(tmp_path / "runs")},
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("serving"):
                break
        assert pids_with(mark)
        proc.send_signal(signal.SIGINT)
        time.sleep(1.0)
        assert proc.poll() is None and pids_with(mark)  # waiting out its stop_timeout
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=15)  # not an hour
        assert wait_for(lambda: not pids_with(mark), 10)
        assert "stopping now (SIGKILL)" in (proc.stderr.read() if proc.stderr else "")
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in pids_with(mark):
            os.kill(pid, signal.SIGKILL)


def test_web_beyond_loopback_needs_its_own_flag_and_says_so() -> None:
    r = run_forked("web", "--host", "0.0.0.0", "--port", str(free_port()))
    assert r.returncode == 2 and "--web-remote" in r.stderr, r.stderr
    with __import__("socket").socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        r = run_forked("web", "--port", str(busy.getsockname()[1]))
    assert r.returncode == 2 and "already in use" in r.stderr and "Traceback" not in r.stderr
    port = free_port()
    proc = subprocess.Popen(
        [*CLI, "web", "--host", "0.0.0.0", "--web-remote", "--port", str(port), "--demo"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stderr is not None
        warning = proc.stderr.readline()
        assert f"warning: listening on 0.0.0.0:{port}" in warning, warning
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_option_prefixes_are_not_guessed() -> None:
    r = run_forked("bench", "--pres", "x")  # a prefix of --preset
    assert r.returncode == 2 and "unrecognized arguments: --pres" in r.stderr


def test_the_named_tracebacks_are_one_line_errors(tmp_path: Path) -> None:
    """Each case of the issue's list that is not the engine's: one line on stderr naming
    the file or option, exit 2, no traceback and no crash log."""
    directory = tmp_path / "d"
    directory.mkdir()
    binary = tmp_path / "bad.toml"
    binary.write_bytes(b"\xff\xfe not text")
    run = tmp_path / "run.json"
    raw = json.loads((ROOT / "results" / "async-drivers.json").read_text())
    raw["settings"]["concurrency"] = [-5, 0]
    run.write_text(json.dumps(raw))
    cases = {
        ("bench", "--preset", str(directory)): f"{directory}: is a directory",
        ("bench", "--preset", str(binary)): "not UTF-8 text",
        ("bench", "--preset", "../x"): "x: no such file",
        ("bench", "--from", str(run)): "key 'concurrency'",
        ("--ghost", str(directory), "--demo", "--go", "--stacks", "a"): "is a directory",
        ("replay", str(directory)): "is a directory",
        ("--stacks-file", str(directory), "stacks"): "is a directory",
        ("load", "http://127.0.0.1:1/", "--body-file", "/dev/zero"): "not a regular file",
        ("--talk", "/dev/zero", "--demo", "--go", "--stacks", "a"): "not a regular file",
    }
    for args, expected in cases.items():
        r = run_forked(*args, env={"STACKRACE_HOME": str(tmp_path / "home")})
        assert r.returncode == 2, (args, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], (args, r.stderr)
        assert "internal error" not in r.stderr
    assert not (tmp_path / "home" / "cache" / "crashes").exists()


@pytest.fixture
def read_only_home(tmp_path: Path):
    home = tmp_path / "ro"
    home.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a read-only tmpfs needs root")
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(home)], check=False
    )
    if r.returncode != 0:
        pytest.skip("this machine does not allow mounting a tmpfs")
    try:
        yield home
    finally:
        subprocess.run(["umount", str(home)], check=False)


def test_a_read_only_home_is_one_line(read_only_home: Path) -> None:
    env = {"STACKRACE_HOME": str(read_only_home)}
    for args in (
        ("serve", "--no-db", "uvicorn"),
        ("bench", "--stacks", "uvicorn", "--concurrency", "1", "--duration", "1s"),
        ("--stacks", "uvicorn", "--go"),
    ):
        r = run_forked(*args, env=env, timeout=60)
        assert r.returncode == 2, (args, r.stderr)
        assert "cannot write its run directories" in r.stderr and "Read-only" in r.stderr
        assert "Traceback" not in r.stderr and "internal error" not in r.stderr


def test_a_bug_is_one_line_naming_a_crash_log(tmp_path: Path) -> None:
    """A command that raises (here: `load` handed an object its code does not expect,
    through the real entry point in a child process) exits 70 with one line naming a
    crash log that holds the traceback; STACKRACE_DEBUG adds the traceback."""
    script = textwrap.dedent(
        """
        import sys
        from stackrace import cli
        from stackrace.commands import load
        def broken(args):
            raise RuntimeError("a bug of ours")
        load.run = broken
        sys.exit(cli.main(["load", "http://127.0.0.1:1/"]))
        """
    )
    home = tmp_path / "home"
    env = {**os.environ, "STACKRACE_HOME": str(home)}
    r = subprocess.run([CLI[0], "-c", script], capture_output=True, text=True, env=env)
    assert r.returncode == 70
    (line,) = r.stderr.strip().splitlines()
    assert "internal error (RuntimeError: a bug of ours)" in line
    log = Path(line.rsplit("details in ", 1)[1])
    assert log.parent == home / "cache" / "crashes"
    assert oct(log.stat().st_mode & 0o777) == "0o600"
    text = log.read_text()
    assert "Traceback" in text and "a bug of ours" in text and "command: stackrace load" in text
    r = subprocess.run(
        [CLI[0], "-c", script], capture_output=True, text=True, env={**env, "STACKRACE_DEBUG": "1"}
    )
    assert r.returncode == 70 and "Traceback" in r.stderr
