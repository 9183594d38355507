"""`run_forked` (tests/hardening/cli_forks.py) is the CLI as `run_cli` runs it: the same
exit status, stdout and stderr, with the test's working directory and environment."""

from __future__ import annotations

from pathlib import Path

from tests.hardening.cli_forks import run_forked
from tests.helpers import ROOT, run_cli


def test_a_forked_run_is_the_run(tmp_path: Path) -> None:
    here = tmp_path / "here"
    here.mkdir()
    # a stacks file found by its relative name (the working directory), with a mistake in
    # it; a home given by the environment, which `stacks` names when it lists
    (here / "mine.toml").write_text(
        '[stacks.mine]\ncommand = ["/bin/true", "{prot}"]\n[stacks.ok]\ncommand = ["/bin/true"]\n'
    )
    home = {"STACKRACE_HOME": str(tmp_path / "home")}
    # the user's own stacks file, found through the environment alone
    config = tmp_path / "config"
    (config / "stackrace").mkdir(parents=True)
    (config / "stackrace" / "stacks.toml").write_text(
        '[stacks.from-env]\ncommand = ["/bin/true"]\n'
    )
    xdg = {"XDG_CONFIG_HOME": str(config)}
    cases = [
        (("--stacks-file", "./mine.toml", "stacks"), here, home),
        (("stacks", "--json"), ROOT, home),
        (("stacks",), ROOT, xdg),
        (("load", "http://127.0.0.1:9/", "--rate", "nan"), ROOT, None),
        (("report", "--help"), ROOT, None),
    ]
    for args, cwd, env in cases:
        forked, run = run_forked(*args, cwd=cwd, env=env), run_cli(*args, cwd=cwd, env=env)
        assert (forked.returncode, forked.stdout, forked.stderr) == (
            run.returncode,
            run.stdout,
            run.stderr,
        ), args
    assert run_forked(*cases[0][0], cwd=here).returncode == 2  # the mistake, found from here
    assert "from-env" in run_forked("stacks", env=xdg).stdout  # the environment, given
