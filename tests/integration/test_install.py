"""`stackrace install` and availability, against this machine.

These tests expect a machine set up by scripts/setup.sh (which runs `stackrace install
--all`): a stack that is not available there is a failure, not a skip.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from stackrace.base import paths
from stackrace.stacks.availability import availability, missing_apt, stale_builds
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.definition import Stack
from stackrace.stacks.install import Installer
from stackrace.stacks.placeholders import filled_needs
from stackrace.stacks.variants import resolve
from tests.helpers import run_cli

STACKS = load_stacks()


@pytest.mark.parametrize("name", sorted(STACKS))
def test_every_stack_is_available_after_setup(name: str) -> None:
    ok, reason, fix = availability(resolve(name, STACKS))
    assert ok, f"{name}: {reason} (fix: {fix})"


def test_second_install_does_nothing_and_is_fast() -> None:
    stacks = [resolve(n, STACKS) for n in STACKS]
    lines: list[str] = []
    t0 = time.monotonic()
    results = Installer(stacks, log=lines.append).run()
    seconds = time.monotonic() - t0
    assert lines == [], "an install step ran on a machine that is already set up"
    assert all(not r.before and r.error is None for r in results)
    assert seconds < 3, f"checking {len(stacks)} stacks took {seconds:.1f}s"

    # and the command says so, exit status 0
    proc = run_cli("install", "--all", timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"0 installed, {len(STACKS)} already complete, 0 failed" in proc.stdout


def _stack(tmp_path: Path, block: str, name: str = "probe") -> Stack:
    path = tmp_path / "stacks.toml"
    path.write_text(block)
    return resolve(name, load_stacks(path))


def test_apt_check() -> None:
    assert missing_apt(["coreutils", "stackrace-no-such-package"]) == ["stackrace-no-such-package"]


def test_build_runs_once_and_again_when_sources_change(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "main.txt").write_text("v1")
    (src / "build.sh").write_text(
        "mkdir -p bin && cp main.txt bin/out && printf '#!/bin/sh\\n' > bin/server"
        " && chmod +x bin/server\n"
    )
    stack = _stack(
        tmp_path,
        f"""
[stacks.probe]
title = "a build that copies its source"
language = "none"
family = "other"
command = ["{src}/bin/server"]
[stacks.probe.needs]
build = [["sh", "build.sh"]]
build_cwd = "{src}"
built = ["{src}/bin/server", "{src}/bin/out"]
""",
    )
    ok, reason, _ = availability(stack)
    assert not ok and "not built" in reason

    [result] = Installer([stack], log=lambda _: None).run()
    assert result.error is None and result.done
    assert availability(stack)[0]
    assert (src / "bin" / "out").read_text() == "v1"

    # nothing to do the second time
    [again] = Installer([stack], log=lambda _: None).run()
    assert not again.before and not again.done

    # a source newer than the built files makes the stack stale, and install rebuilds
    past = time.time() - 60
    for built in ("server", "out"):
        os.utime(src / "bin" / built, (past, past))
    (src / "main.txt").write_text("v2")
    assert "older than" in " ".join(stale_builds(filled_needs(stack)))
    assert not availability(stack)[0]
    [rebuilt] = Installer([stack], log=lambda _: None).run()
    assert rebuilt.error is None
    assert (src / "bin" / "out").read_text() == "v2"


def test_failing_build_fails_the_command_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "stacks.toml").write_text(
        f"""
[stacks.broken]
title = "a build that fails"
language = "none"
family = "other"
command = ["{tmp_path}/bin/server"]
[stacks.broken.needs]
build = [["sh", "-c", "echo 'main.go:3: syntax error' >&2; exit 3"]]
build_cwd = "{tmp_path}"
built = ["{tmp_path}/bin/server"]
"""
    )
    proc = run_cli(
        "--stacks-file", str(tmp_path / "stacks.toml"), "install", "broken",
        timeout=60, cwd=paths.shipped_dir(),
    )  # fmt: skip
    assert proc.returncode == 1
    assert "exited with 3" in proc.stdout
    assert "main.go:3: syntax error" in proc.stdout
    assert "FAILED" in proc.stdout
    assert "could not complete: broken" in proc.stderr


def test_install_needs_names_or_all() -> None:
    proc = run_cli("install")
    assert proc.returncode == 2
    assert "--all" in proc.stderr
