"""`stackrace clean` removes what stackrace made and nothing else: a directory of a known
name that stackrace did not mark (stackrace.madeby), or a user's directory inside one it
did, is listed as "left alone" and kept. The real CLI on a real home directory, whose
stackrace directories are made by stackrace's own code (the launcher's run directory,
the apps' working copy)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stackrace.base import paths
from stackrace.stacks.run_roots import new_run_root
from tests.hardening.test_package_tidy import clean_env, run_alone


def test_clean_leaves_what_stackrace_did_not_mark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("STACKRACE_HOME", str(home))
    monkeypatch.delenv("STACKRACE_RUNS_DIR", raising=False)
    root, fd = new_run_root()  # what a launcher makes: cache/runs/<time>-XXXXXXXX
    os.close(fd)
    (root / "uvicorn").mkdir()
    (root / "uvicorn" / "log.txt").write_text("a stack's log")
    paths.sync_apps(paths.shipped_dir() / "apps", home / "data" / "apps")  # a package's copy
    # the user's own, under names stackrace knows
    notes = home / "cache" / "runs" / "my-notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("mine")
    site = home / "data" / "apps" / "my-django-site"
    site.mkdir()
    (site / "settings.py").write_text("DEBUG = False\n")
    venv = home / "data" / "venv-pypy"  # a known name, made by the user, not by stackrace
    venv.mkdir()
    (venv / "mine").write_text("mine")
    shipped_top = sorted(p.name for p in (paths.shipped_dir() / "apps").iterdir() if p.is_dir())
    env = clean_env(STACKRACE_HOME=str(home), HOME=str(tmp_path))

    dry = run_alone(env, "clean", "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    for kept in (notes, site, venv):
        line = next(x for x in dry.stdout.splitlines() if str(kept) in x)
        assert "left alone" in line, line
    assert f"would remove {root}" in dry.stdout

    done = run_alone(env, "clean")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not root.exists()  # stackrace's run directory: gone
    assert (notes / "todo.txt").read_text() == "mine"
    assert (site / "settings.py").read_text() == "DEBUG = False\n"
    assert (venv / "mine").read_text() == "mine"
    # the copy's own directories went; the user's stayed beside them
    left = sorted(p.name for p in (home / "data" / "apps").iterdir() if p.is_dir())
    assert left == ["my-django-site"], (left, shipped_top)
    assert shipped_top  # (the copy had directories to remove)
