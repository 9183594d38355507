"""stacks.toml values and stack names are checked before anything starts; every error is
one line naming the file, the stack and the key (or the option), never a traceback."""

from __future__ import annotations

import asyncio
import os
import subprocess
import textwrap
from pathlib import Path

import msgspec
import pytest

from stackrace.commands._common import resolve_all
from stackrace.settings.parsers import COMMAND_LINE
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.definition import Stack
from stackrace.stacks.launcher import Launcher
from stackrace.stacks.running import LaunchError, RunningStack
from stackrace.stacks.variants import resolve
from tests.hardening.cli_forks import run_forked
from tests.hardening.conftest import assert_one_line_error

GOOD = """
[stacks.ok]
title = "test server"
language = "python"
family = "async"
command = ["{python}", "{root}/tests/servers/testserver.py", "{port}"]
"""


def stacks_file(tmp_path: Path, extra: str = "", **keys: str) -> Path:
    """A stacks file with stack 'ok' and a stack 'bad' that has `keys` (TOML values)."""
    bad = "\n".join(f"{k} = {v}" for k, v in keys.items())
    text = GOOD + textwrap.dedent(
        f"""
        [stacks.bad]
        title = "bad"
        language = "python"
        family = "async"
        command = ["{{python}}", "{{root}}/tests/servers/testserver.py", "{{port}}"]
        {bad}
        """
    )
    path = tmp_path / "my.toml"
    path.write_text(text + extra)
    return path


@pytest.mark.parametrize(
    ("keys", "key", "why"),
    [
        ({"ready_timeout": "-1.0"}, "ready_timeout", "above zero"),
        ({"ready_timeout": "0.0"}, "ready_timeout", "above zero"),
        ({"stop_timeout": "0.0"}, "stop_timeout", "above zero"),
        ({"ready_timeout": "nan"}, "ready_timeout", "above zero"),
        ({"cpus": "[-1]"}, "cpus", "start at 0"),
        ({"cpus": "[]"}, "cpus", "at least one"),
        ({"cpus": "[0, 0]"}, "cpus", "twice"),
        ({"cwd": '"{apps}/{prot}"'}, "cwd", "unknown placeholder {prot}"),
        ({"env": '{ PORT = "{prot}" }'}, "env.PORT", "unknown placeholder {prot}"),
        ({"params": '{ port = "1" }'}, "params.port", "built-in placeholder"),
    ],
)
def test_bad_values_are_refused_when_the_file_is_read(
    tmp_path: Path, keys: dict[str, str], key: str, why: str
) -> None:
    path = stacks_file(tmp_path, **keys)
    for args in (["stacks"], ["serve", "ok", "--no-db"], ["bench", "--stacks", "ok"]):
        r = run_forked("--stacks-file", str(path), *args)
        assert_one_line_error(r, "my.toml", "stack 'bad'", f"key '{key}'", why)


def test_placeholder_typo_in_a_command_is_not_available_but_an_error(tmp_path: Path) -> None:
    """The issue's case: {prot} passed `stackrace stacks` as available, failed at start."""
    path = tmp_path / "my.toml"
    path.write_text(GOOD.replace('"{port}"]', '"{prot}"]'))
    r = run_forked("--stacks-file", str(path), "stacks")
    assert_one_line_error(r, "my.toml: stack 'ok': key 'command[2]': unknown placeholder {prot}")


def test_placeholder_typo_inside_a_template_file_names_both_files(tmp_path: Path) -> None:
    tmpl = tmp_path / "conf.tmpl"
    tmpl.write_text("listen {host}:{prot};\n")
    extra = f'[[stacks.ok.files]]\npath = "conf"\ntemplate = "{tmpl}"\n'
    path = stacks_file(tmp_path, extra=extra)
    r = run_forked("--stacks-file", str(path), "stacks")
    assert_one_line_error(r, "my.toml", "stack 'ok'", "files[0].template", "conf.tmpl", "{prot}")


def test_cpus_this_machine_lacks_name_file_stack_and_key(tmp_path: Path) -> None:
    """cpus = [99]: a traceback from preexec_fn at start before. The file may be shared
    with a bigger machine, so `stacks` lists it as unavailable (with the reason) and
    every command that would start it refuses it."""
    missing = max(os.sched_getaffinity(0)) + 97
    path = stacks_file(tmp_path, cpus=f"[{missing}]")
    r = run_forked("--stacks-file", str(path), "stacks", "--json")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert f"key 'cpus': CPU {missing} is not one this machine" in r.stdout
    for args in (["serve", "bad", "--no-db"], ["bench", "--stacks", "bad"], ["verify", "bad"]):
        r = run_forked("--stacks-file", str(path), *args)
        assert_one_line_error(r, "my.toml", "stack 'bad'", "key 'cpus'", f"CPU {missing}")


def test_launcher_never_surfaces_a_bare_subprocess_error(tmp_path: Path) -> None:
    """A Stack built by hand (no resolve) with a CPU that is not there, and a process
    set-up that fails in the child (entering a cgroup that does not exist): both are a
    LaunchError that says what failed, never SubprocessError."""
    base = resolve("ok", load_stacks(stacks_file(tmp_path)))
    missing = max(os.sched_getaffinity(0)) + 97
    by_hand = Stack("ok", "ok", msgspec.structs.replace(base.spec, cpus=[missing]))

    async def run() -> None:
        async with Launcher(tmp_path / "runs") as launcher:
            with pytest.raises(LaunchError, match=f"key 'cpus': CPU {missing}"):
                await launcher.start(by_hand)
            rs = RunningStack(stack=base, port=0, run_dir=tmp_path, log_path=tmp_path / "log")
            rs.cgroup_dir = tmp_path / "no-such-cgroup"
            with open(rs.log_path, "ab") as log, pytest.raises(LaunchError) as err:
                launcher._popen(rs, ["/bin/true"], tmp_path, dict(os.environ), log, True)
            assert "process set-up failed" in str(err.value)
            assert "no-such-cgroup" in str(err.value)
            assert not isinstance(err.value, subprocess.SubprocessError)

    asyncio.run(run())


def test_unknown_stack_names_the_stacks_file_given(tmp_path: Path) -> None:
    path = stacks_file(tmp_path)
    r = run_forked("--stacks-file", str(path), "bench", "--stacks", "nope")
    line = assert_one_line_error(r, "my.toml: no stack 'nope'")
    assert "stacks.toml" not in line
    r = run_forked("--stacks-file", str(path), "serve", "nope", "--no-db")
    assert_one_line_error(r, "my.toml: no stack 'nope'")


def test_a_stack_named_twice_is_refused(tmp_path: Path) -> None:
    path = stacks_file(tmp_path)
    for args in (["bench", "--stacks", "ok,ok"], ["serve", "ok", "ok", "--no-db"]):
        r = run_forked("--stacks-file", str(path), *args)
        assert_one_line_error(r, "stack 'ok' is named twice")
    # two variants of one stack are two stacks
    chosen = resolve_all(["ok:workers=1", "ok:workers=2"], load_stacks(path), named_in=COMMAND_LINE)
    assert [s.name for s in chosen] == ["ok:workers=1", "ok:workers=2"]
