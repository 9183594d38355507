"""A stacks file outside the package is announced and trusted deliberately: a
./stacks.toml that replaces a shipped stack's command (a cloned repository's "uvicorn")
runs nothing until `stackrace stacks --trust ./stacks.toml`, and again nothing once the
file changes; one that only adds stacks runs them only once trusted; every command that
runs stacks names the files it read first. The real CLI in a directory of its own, real servers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.hardening.cli_forks import run_forked
from tests.hardening.conftest import assert_one_line_error
from tests.helpers import ROOT, run_cli

pytestmark = pytest.mark.slow

SERVER = ROOT / "tests" / "servers" / "testserver.py"
BENCH = ["--duration", "0.5s", "--warmup", "0s", "--concurrency", "1", "--no-progress"]


def _clone(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A directory holding a ./stacks.toml whose "uvicorn" leaves a mark and serves, and
    the environment of a home of its own."""
    here = tmp_path / "clone"
    here.mkdir()
    mark = tmp_path / "PWNED"
    (here / "stacks.toml").write_text(
        "[stacks.uvicorn]\n"
        f'command = ["/bin/sh", "-c", "touch {mark}; exec {sys.executable} {SERVER} {{port}}"]\n'
    )
    return here, mark, {"STACKRACE_HOME": str(tmp_path / "home")}


def test_an_untrusted_override_of_a_shipped_stack_is_refused(tmp_path: Path) -> None:
    here, mark, env = _clone(tmp_path)
    for args in (
        ["bench", "--stacks", "uvicorn", *BENCH],
        ["serve", "uvicorn"],
        ["verify", "uvicorn"],
        ["--stacks", "uvicorn", "--go"],  # the app
    ):
        r = run_forked(*args, cwd=here, env=env)
        assert_one_line_error(r, "./stacks.toml", "'uvicorn'", "stackrace stacks --trust", rc=2)
    assert not mark.exists(), "the untrusted file's command ran"
    # `stackrace stacks` lists it, and says it is not used
    r = run_forked("stacks", cwd=here, env=env)
    assert r.returncode == 0, r.stderr
    # (on stderr in a pipe, on stdout at a terminal: the listing's notes)
    said = "not used: ./stacks.toml: replaces the shipped stack 'uvicorn'"
    assert said in r.stdout + r.stderr

    # trusted: it runs, and the run names the file first
    r = run_forked("stacks", "--trust", "./stacks.toml", cwd=here, env=env)
    assert r.returncode == 0 and "trusted" in r.stdout, r.stderr
    r = run_cli("bench", "--stacks", "uvicorn", *BENCH, cwd=here, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    first = r.stderr.splitlines()[:3]
    assert any(f"{here / 'stacks.toml'} (found in this directory)" in x for x in first), first
    assert mark.exists()

    # changed afterwards (a `git pull`): not trusted any more
    mark.unlink()
    with (here / "stacks.toml").open("a") as f:
        f.write("# changed\n")
    r = run_forked("bench", "--stacks", "uvicorn", *BENCH, cwd=here, env=env)
    assert_one_line_error(r, "./stacks.toml", "'uvicorn'")
    assert not mark.exists()
    # named with --stacks-file, it is asked for by name
    # (named on the command line, so not announced under --no-progress: asked for)
    loud = [a for a in BENCH if a != "--no-progress"]
    r = run_cli(
        "--stacks-file", "./stacks.toml", "bench", "--stacks", "uvicorn", *loud, cwd=here, env=env
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(given with --stacks-file)" in r.stderr.splitlines()[0]
    assert mark.exists()


def test_a_file_that_only_adds_stacks_is_named_and_runs_once_trusted(tmp_path: Path) -> None:
    here = tmp_path / "project"
    here.mkdir()
    (here / "stacks.toml").write_text(
        f'[stacks.mine]\ncommand = ["{sys.executable}", "{SERVER}", "{{port}}"]\n'
    )
    env = {"STACKRACE_HOME": str(tmp_path / "home")}
    # what it adds runs only once trusted (tests/hardening/test_trust_added.py)
    r = run_forked("bench", "--stacks", "mine", *BENCH, cwd=here, env=env)
    assert_one_line_error(r, "'mine'", "stackrace stacks --trust ./stacks.toml")
    assert run_forked("stacks", "--trust", "./stacks.toml", cwd=here, env=env).returncode == 0
    r = run_cli("bench", "--stacks", "mine", *BENCH, cwd=here, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    first = r.stderr.splitlines()[:3]
    assert any("(shipped with stackrace)" in x for x in first), first
    assert any(f"{here / 'stacks.toml'} (found in this directory)" in x for x in first), first
