"""Only the command line names executables: a variant of a `path` param (a server binary)
given by a preset or a run file (`bench --from`) is refused in one line and runs
nothing, unless it is the param's default or on the stack's own `executables` list; the
same variant on the command line runs. The real CLI, a real server started through a
path param, and a planted executable that leaves a mark when it runs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.hardening.cli_forks import run_forked
from tests.hardening.conftest import assert_one_line_error
from tests.helpers import ROOT, run_cli

pytestmark = pytest.mark.slow


def _setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A stacks file whose stack runs the interpreter its `server` param names, a planted
    executable (an interpreter that first leaves a mark), and the mark's path."""
    mark = tmp_path / "RAN"
    evil = tmp_path / "evilbin"
    evil.write_text(f'#!/bin/sh\ntouch {mark}\nexec {sys.executable} "$@"\n')
    evil.chmod(0o755)
    stacks = tmp_path / "stacks.toml"
    stacks.write_text(
        "[stacks.pathy]\n"
        'command = ["{server}", "' + str(ROOT / "tests/servers/testserver.py") + '", "{port}"]\n'
        f'params = {{ server = "{os.path.normpath(sys.executable)}" }}\n'
        'kinds = { server = "path" }\n'
    )
    return stacks, evil, mark


BENCH = ["--duration", "0.5s", "--warmup", "0s", "--concurrency", "1", "--no-progress"]


def test_a_preset_naming_an_executable_runs_nothing(tmp_path: Path) -> None:
    stacks, evil, mark = _setup(tmp_path)
    preset = tmp_path / "evil.toml"
    preset.write_text(f'description = "x"\nstacks = ["pathy:server={evil}"]\n')
    r = run_forked("--stacks-file", str(stacks), "bench", "--preset", str(preset), *BENCH)
    assert_one_line_error(r, str(preset), "server", str(evil), "command line")
    r = run_forked("--stacks-file", str(stacks), "--preset", str(preset), "--go")  # the app
    assert_one_line_error(r, str(preset), str(evil))
    assert not mark.exists(), "the preset's executable ran"


def test_a_run_file_naming_an_executable_runs_nothing_again(tmp_path: Path) -> None:
    stacks, evil, mark = _setup(tmp_path)
    run = tmp_path / "run.json"
    # the user's own command line may name it: it runs, and the run file records it
    r = run_cli(
        "--stacks-file",
        str(stacks),
        "bench",
        "--stacks",
        f"pathy:server={evil}",
        *BENCH,
        "--json",
        str(run),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert mark.exists()
    mark.unlink()
    # the same run, given back as a file: its executable is not taken
    r = run_forked("--stacks-file", str(stacks), "bench", "--from", str(run), *BENCH)
    assert_one_line_error(r, str(run), str(evil))
    assert not mark.exists(), "the run file's executable ran"


def test_the_stacks_own_list_lets_a_preset_name_one(tmp_path: Path) -> None:
    stacks, evil, mark = _setup(tmp_path)
    stacks.write_text(stacks.read_text() + f'executables = {{ server = ["{evil}"] }}\n')
    preset = tmp_path / "listed.toml"
    preset.write_text(f'description = "x"\nstacks = ["pathy:server={evil}"]\n')
    r = run_cli("--stacks-file", str(stacks), "bench", "--preset", str(preset), *BENCH)
    assert r.returncode == 0, r.stdout + r.stderr
    assert mark.exists()
