"""stacks.variants.resolve: only the command line names executables. A `path` param's value from
a file (a preset, a run file, another stack's `upstream`) must be its default or on the
stack's `executables` list (the real CLI: tests/hardening/test_named_executables.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from stackrace.settings.parsers import COMMAND_LINE
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.definition import ConfigError
from stackrace.stacks.variants import resolve

PYTHON = os.path.normpath(sys.executable)


def _stacks(tmp_path: Path, extra: str = "") -> dict:
    f = tmp_path / "stacks.toml"
    f.write_text(
        "[stacks.pathy]\n"
        'command = ["{server}", "{port}"]\n'
        'params = { server = "/bin/true" }\n'
        'kinds = { server = "path" }\n' + extra + "[stacks.front]\n"
        'command = ["/bin/true", "{upstream_port}"]\n'
        'params = { backend = "pathy" }\n'
        'upstream = "{backend}"\n'
    )
    return load_stacks(f)


def test_a_file_may_not_name_an_executable_the_command_line_may(tmp_path: Path) -> None:
    stacks = _stacks(tmp_path)
    ref = f"pathy:server={PYTHON}"
    assert resolve(ref, stacks, named_in=COMMAND_LINE).params["server"] == PYTHON
    with pytest.raises(ConfigError, match=r"^the preset p\.toml: stack .*names the executable"):
        resolve(ref, stacks, named_in="the preset p.toml")
    with pytest.raises(ConfigError, match="names the executable"):
        resolve(ref, stacks)  # a caller that says nothing is a file's, not the keyboard's
    # its default is the stacks file's own choice: any source may name it
    assert resolve("pathy:server=/bin/true", stacks, named_in="the run file r.json")


def test_the_stacks_own_list_is_open_to_files(tmp_path: Path) -> None:
    stacks = _stacks(tmp_path, f'executables = {{ server = ["{PYTHON}"] }}\n')
    assert resolve(f"pathy:server={PYTHON}", stacks, named_in="the preset p.toml")
    with pytest.raises(ConfigError, match="names the executable /bin/false"):
        resolve("pathy:server=/bin/false", stacks, named_in="the preset p.toml")


def test_an_upstream_is_a_files_reference(tmp_path: Path) -> None:
    f = tmp_path / "stacks.toml"
    f.write_text(
        "[stacks.pathy]\n"
        'command = ["{server}", "{port}"]\n'
        'params = { server = "/bin/true" }\n'
        'kinds = { server = "path" }\n'
        "[stacks.front]\n"
        'command = ["/bin/true", "{upstream_port}"]\n'
        f'upstream = "pathy:server={PYTHON}"\n'
    )
    with pytest.raises(ConfigError, match=r"upstream.*names the executable"):
        resolve("front", load_stacks(f), named_in=COMMAND_LINE)


@pytest.mark.parametrize(
    "listed, why",
    [
        ('{ nope = ["/bin/true"] }', "not a param of kind"),
        ('{ server = ["bin/true"] }', "not an absolute path"),
        ('{ server = ["/bin/../bin/true"] }', "not a normalised path"),
    ],
)
def test_the_list_is_checked_when_the_file_is_read(tmp_path: Path, listed: str, why: str) -> None:
    with pytest.raises(ConfigError, match=f"executables.*{why}"):
        _stacks(tmp_path, f"executables = {listed}\n")


def test_the_shipped_php_stacks_list_debians_binaries() -> None:
    stacks = load_stacks()
    for name in ("php-fpm-nginx", "php-fpm-lighttpd", "php-cgi-nginx"):
        assert stacks[name].executables, name
