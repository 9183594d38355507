"""A ./stacks.toml that only *adds* a stack runs nothing of it untrusted (issue 48, item
2): naming the stack to `install`, `verify`, `serve`, `bench`, `tune` or the app refuses
in one line with the `stackrace stacks --trust` command; `install --all` and a bare
`verify` skip it and say so in one line; once trusted, it runs. The stack's build and
command would leave a mark: no mark, nothing ran. The real CLI in a directory of its
own; `install --all -n` says what it *would* install."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.definition import ConfigError
from stackrace.stacks.variants import resolve
from tests.hardening.cli_forks import run_forked
from tests.hardening.conftest import assert_one_line_error
from tests.helpers import ROOT, run_cli

SERVER = ROOT / "tests" / "servers" / "testserver.py"
BENCH = ["--duration", "0.5s", "--warmup", "0s", "--concurrency", "1", "--no-progress"]


def _block(name: str, mark: Path) -> str:
    """A stack whose build and whose command each leave a mark (then serve)."""
    return (
        f"[stacks.{name}]\n"
        f'command = ["/bin/sh", "-c", "touch {mark}.ran; '
        f'exec {sys.executable} {SERVER} {{port}}"]\n'
        f"[stacks.{name}.needs]\n"
        f'build = [["/bin/sh", "-c", "touch {mark}.built"]]\n'
        f'build_cwd = "{mark.parent}"\n'
        f'built = ["{mark}.built"]\n'
    )


def _project(tmp_path: Path, *, alone: bool = False) -> tuple[Path, Path, dict[str, str]]:
    here = tmp_path / "clone"
    here.mkdir()
    mark = tmp_path / "PWNED"
    top = "replace = true\n" if alone else ""
    (here / "stacks.toml").write_text(top + _block("added", mark))
    home = tmp_path / "home"
    env = {"STACKRACE_HOME": str(home), "XDG_CONFIG_HOME": str(home / "config")}
    return here, mark, env


def _nothing_ran(mark: Path) -> None:
    left = sorted(p.name for p in mark.parent.glob(f"{mark.name}.*"))
    assert not left, f"the untrusted file's build or command ran: {left}"


def test_the_catalogue_marks_added_stacks_and_resolve_refuses_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here, _mark, env = _project(tmp_path)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(here)
    stacks = load_stacks()
    assert set(stacks.untrusted) == {"added"}
    assert "uvicorn" in stacks and "uvicorn" not in stacks.untrusted  # shipped: usable
    resolve("uvicorn", stacks)
    with pytest.raises(ConfigError, match=r"stackrace stacks --trust \./stacks\.toml"):
        resolve("added", stacks)
    with pytest.raises(ConfigError, match="not trusted yet"):
        resolve("added:workers=2", stacks)


@pytest.mark.slow
def test_naming_an_added_stack_refuses_until_it_is_trusted(tmp_path: Path) -> None:
    here, mark, env = _project(tmp_path)
    for args in (
        ["install", "added"],
        ["install", "--into", sys.executable, "added"],
        ["verify", "added"],
        ["verify", "nginx-proxy:backend=added"],  # a shipped stack's upstream
        ["serve", "added"],
        ["bench", "--stacks", "added", *BENCH],
        ["bench", "--stacks", "uvicorn,added", *BENCH],
        ["tune", "added", "--slo", "p99<50ms"],
        ["--stacks", "added", "--go"],  # the app
    ):
        r = run_forked(*args, cwd=here, env=env)
        assert_one_line_error(r, "'added'", "not trusted yet", "stackrace stacks --trust", rc=2)
    _nothing_ran(mark)
    # listed, not available, with the command that trusts it
    r = run_forked("stacks", cwd=here, env=env)
    assert r.returncode == 0, r.stderr
    assert "not run: 1 stack of ./stacks.toml, not trusted yet ('added')" in r.stdout + r.stderr

    r = run_forked("stacks", "--trust", "./stacks.toml", cwd=here, env=env)
    assert r.returncode == 0 and "trusted" in r.stdout, r.stderr
    r = run_cli("bench", "--stacks", "added", *BENCH, cwd=here, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert Path(f"{mark}.ran").exists()


@pytest.mark.slow
def test_install_all_and_a_bare_verify_skip_untrusted_stacks_in_one_line(tmp_path: Path) -> None:
    # `replace = true`: the file alone, so that --all is its one stack and nothing
    # shipped is installed or started by the test
    here, mark, env = _project(tmp_path, alone=True)
    line = "skipped 1 stack of ./stacks.toml, not trusted yet ('added'): `stackrace stacks --trust"
    r = run_cli("install", "--all", cwd=here, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert [x for x in r.stderr.splitlines() if "skipped" in x] == [
        f"stackrace install: {line} ./stacks.toml` to use it"
    ]
    assert "0 installed" in r.stdout
    r = run_cli("verify", cwd=here, env=env)
    assert f"stackrace verify: {line}" in r.stderr, r.stderr
    assert "0 of 0 stacks verified" in r.stderr
    _nothing_ran(mark)


def test_a_dry_run_never_says_installed(tmp_path: Path) -> None:
    """`install --all -n` ended "1 installed" for a stack it only planned to build."""
    mark = tmp_path / "BUILD"
    f = tmp_path / "mine.toml"
    f.write_text(_block("mine", mark))
    r = run_forked("--stacks-file", str(f), "install", "--all", "-n", env={})
    assert r.returncode == 0, r.stdout + r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("1 would be installed, 0 already complete, 0 cannot be installed"), last
    assert "installed," not in last.replace("would be installed,", "")
    _nothing_ran(mark)
