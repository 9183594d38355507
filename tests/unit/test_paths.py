"""Where stackrace's files live (stackrace.base.paths) and which stacks file it reads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stackrace.base import paths
from stackrace.stacks.catalogue import GIVEN, HERE, SHIPPED, USER, load_stacks, stacks_files
from tests.helpers import ROOT

ONE_STACK = """
[stacks.mine]
title = "mine"
language = "python"
family = "async"
command = ["{python}", "-m", "http.server", "{port}"]
"""


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for var in ("STACKRACE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_a_checkout_runs_from_the_repository_as_before(clean_env: Path) -> None:
    assert paths.is_checkout()
    assert paths.shipped_stacks_file() == ROOT / "stacks.toml"
    assert paths.apps_dir() == ROOT / "apps"  # builds stay in apps/go/*/bin, node_modules
    assert paths.pypy_venv() == ROOT / ".venv-pypy"
    assert paths.presets_dir() == ROOT / "presets"


def test_xdg_defaults_variables_and_stackrace_home(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    home = clean_env
    assert paths.config_dir() == home / ".config" / "stackrace"
    assert paths.data_dir() == home / ".local" / "share" / "stackrace"
    assert paths.cache_dir() == home / ".cache" / "stackrace"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "c"))
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/is/ignored")  # as the spec says
    assert paths.cache_dir() == tmp_path / "c" / "stackrace"
    assert paths.config_dir() == home / ".config" / "stackrace"
    monkeypatch.setenv("STACKRACE_HOME", str(tmp_path / "all"))
    assert paths.cache_dir() == tmp_path / "all" / "cache"
    assert paths.data_dir() == tmp_path / "all" / "data"
    assert paths.user_stacks_file() == tmp_path / "all" / "config" / "stacks.toml"
    # the run directories and the MariaDB follow the cache directory
    from stackrace.db.paths import default_dir
    from stackrace.stacks.run_roots import runs_dir

    monkeypatch.delenv("STACKRACE_RUNS_DIR", raising=False)
    monkeypatch.delenv("STACKRACE_DB_DIR", raising=False)
    assert runs_dir() == tmp_path / "all" / "cache" / "runs"
    assert default_dir() == tmp_path / "all" / "cache" / "mariadb"


def test_stacks_file_search_order(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "work"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert stacks_files()[-1] == (ROOT / "stacks.toml", SHIPPED)  # the topmost file read
    user = paths.user_stacks_file()
    user.parent.mkdir(parents=True)
    user.write_text(ONE_STACK)
    assert stacks_files()[-1] == (user, USER)
    (elsewhere / "stacks.toml").write_text(ONE_STACK)
    assert stacks_files()[-1] == (elsewhere / "stacks.toml", HERE)
    given = tmp_path / "given.toml"
    assert stacks_files(str(given)) == [(given, GIVEN)]
    # a file found adds to the shipped one (and the user's): every file read is recorded
    # with its hash, the topmost as the file's origin
    read = load_stacks()
    assert "mine" in read and "uvicorn" in read and read.origin == HERE
    assert len(read.sha256) == 64
    assert [o for _, o, _ in read.files] == [SHIPPED, USER, HERE]
    # `replace = true` at a file's top: that file alone
    (elsewhere / "stacks.toml").write_text("replace = true\n" + ONE_STACK)
    assert list(load_stacks()) == ["mine"]
    # in the checkout, ./stacks.toml is the shipped file and is read once, as that
    user.unlink()
    monkeypatch.chdir(ROOT)
    assert stacks_files()[-1] == (ROOT / "stacks.toml", SHIPPED)  # the topmost file read
    assert len(load_stacks().files) == 1


def test_the_working_copy_follows_the_shipped_apps_and_keeps_builds(tmp_path: Path) -> None:
    src, dst = tmp_path / "shipped", tmp_path / "copy"
    (src / "go" / "svc").mkdir(parents=True)
    (src / "go" / "svc" / "main.go").write_text("package main // v1\n")
    (src / "python").mkdir()
    (src / "python" / "app.py").write_text("v1\n")
    (src / "python" / "gone.py").write_text("old\n")
    paths.sync_apps(src, dst)
    assert (dst / "go" / "svc" / "main.go").read_text() == "package main // v1\n"
    # a build's output and a Python cache beside the sources belong to this machine
    (dst / "go" / "svc" / "bin").mkdir()
    (dst / "go" / "svc" / "bin" / "server").write_text("binary")
    (dst / "python" / "__pycache__").mkdir()
    unchanged = dst / "python" / "app.py"
    old = 1_000_000_000
    os.utime(unchanged, (old, old))
    os.utime(dst / "go" / "svc" / "main.go", (old, old))
    # an upgrade: one source changes, one goes
    (src / "go" / "svc" / "main.go").write_text("package main // v2\n")
    (src / "python" / "gone.py").unlink()
    paths.sync_apps(src, dst)
    changed = dst / "go" / "svc" / "main.go"
    assert changed.read_text() == "package main // v2\n"
    assert changed.stat().st_mtime > old  # newer than the old build: it is rebuilt
    assert unchanged.stat().st_mtime == old  # untouched: nothing rebuilt for it
    assert not (dst / "python" / "gone.py").exists()
    assert (dst / "go" / "svc" / "bin" / "server").read_text() == "binary"
    assert (dst / "python" / "__pycache__").is_dir()
    # nothing changed: nothing is read but the stamp and the file list
    before = changed.stat().st_mtime_ns
    paths.sync_apps(src, dst)
    assert changed.stat().st_mtime_ns == before
