"""The package as a user without a clone gets it: an sdist, a wheel built from it, and a
fresh venv outside the repository, run from a directory that is not the checkout.

Built as `python -m build` does (sdist, then the wheel from the sdist, so MANIFEST.in is
tested too), with the PEP 517 hooks of this venv's setuptools (no isolated build env to
download). The venv installs the wheel's dependencies from the package index (pip's
cache makes that quick after the first time).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, TestServer

pytestmark = pytest.mark.slow
# what the source distribution is made from: the repository minus its local state
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "stacks.toml")
SOURCE_DIRS = ("src", "apps", "presets", "docs")
LOCAL = shutil.ignore_patterns(
    "__pycache__", "*.egg-info", "bin", "node_modules", "_shipped", "*.so"
)  # *.so: an editable install builds the C transport in place; the wheel builds its own


def sh(*argv: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300):
    r = subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert r.returncode == 0, f"{argv}: {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    return r


def build_wheel(tmp: Path) -> Path:
    src = tmp / "source"
    src.mkdir()
    for name in SOURCES:
        shutil.copy2(ROOT / name, src / name)
    for name in SOURCE_DIRS:
        shutil.copytree(ROOT / name, src / name, ignore=LOCAL)
    dist = tmp / "dist"
    hook = "from setuptools import build_meta as b; import sys; print(b.build_sdist(sys.argv[1]))"
    sdist = sh(sys.executable, "-c", hook, dist, cwd=src).stdout.strip().splitlines()[-1]
    sh(
        sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
        "-w", dist, dist / sdist, cwd=tmp,
    )  # fmt: skip
    (wheel,) = dist.glob("stackrace-*.whl")
    return wheel


def test_the_package_works_outside_the_repository(tmp_path: Path, server: TestServer) -> None:
    wheel = build_wheel(tmp_path)
    venv = tmp_path / "venv"
    sh(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    sh(venv / "bin" / "pip", "install", "-q", "--disable-pip-version-check", wheel, cwd=tmp_path)
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "STACKRACE_RUNS_DIR", "STACKRACE_DB_DIR")
    }
    env |= {"PATH": f"{venv / 'bin'}:{env['PATH']}", "STACKRACE_HOME": str(home)}

    def stackrace(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return sh(venv / "bin" / "stackrace", *args, cwd=elsewhere, env=env, timeout=timeout)

    site = Path(
        sh(venv / "bin" / "python", "-c", "import stackrace; print(stackrace.__file__)",
           cwd=elsewhere, env=env).stdout.strip()
    ).parent  # fmt: skip
    assert venv in site.parents  # the package, not the checkout
    shipped = site / "_shipped"
    assert (shipped / "stacks.toml").is_file() and (shipped / "apps" / "python").is_dir()
    assert not list(shipped.rglob("node_modules")) and not list(shipped.rglob("bin"))
    # the documents the README and --help point to are in the package
    docs = {p.name for p in (shipped / "docs").glob("*.md")}
    assert docs == {p.name for p in (ROOT / "docs").glob("*.md")} and "db.md" in docs
    said = "".join(stackrace_help(venv, elsewhere, env).split())  # argparse wraps the path
    assert f"Documentation:{shipped / 'docs'}" in said
    files_before = sorted(p for p in shipped.rglob("*"))

    version = stackrace("--version").stdout.strip()
    assert version == f"stackrace {_version()}"
    listing = stackrace("stacks")
    # in a pipe the notes go to stderr, the rows (tab-separated) to stdout
    assert f"stacks file: {shipped / 'stacks.toml'} (shipped with stackrace)" in listing.stderr
    assert "uvicorn\t" in listing.stdout

    load = stackrace("load", server.url("/hello"), "-c", "2", "-d", "1s", "--json")
    assert json.loads(load.stdout)["total"]["ok"] > 100

    installed = stackrace("install", "uvicorn")
    assert "1 installed" in installed.stdout or "already complete" in installed.stdout
    verified = stackrace("verify", "uvicorn")
    assert "1 of 1 stacks verified" in verified.stderr, verified.stdout
    # the apps ran from the data directory's copy; nothing was written into the package
    assert (home / "data" / "apps" / "python" / "asgi_app.py").is_file()
    assert sorted(p for p in shipped.rglob("*")) == files_before
    assert list((home / "cache" / "runs").iterdir())  # the run directories are the cache's
    # and `stackrace clean` takes away what running it made, before the package goes
    cleaned = stackrace("clean")
    assert "removed " in cleaned.stdout
    assert not (home / "data").exists() and not (home / "cache" / "runs").exists()


def stackrace_help(venv: Path, cwd: Path, env: dict[str, str]) -> str:
    return sh(venv / "bin" / "stackrace", "--help", cwd=cwd, env=env).stdout


def _version() -> str:
    from stackrace import __version__

    return __version__
