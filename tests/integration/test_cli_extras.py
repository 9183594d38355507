"""`--version`, shell completion (run in a real bash), NO_COLOR and `--no-progress`."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import STACKRACE, TestServer, run_cli

# an SGR sequence that sets a colour (foreground, background, 256 or true colour)
COLOUR = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-9]|4[0-9]|9[0-7]|10[0-7])(?:;[0-9;]*)?m")


def test_version_is_the_packages() -> None:
    r = run_cli("--version")
    assert r.returncode == 0
    assert r.stdout.strip() == f"stackrace {importlib.metadata.version('stackrace')}"


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_completes_commands_options_and_stack_names(tmp_path: Path) -> None:
    script = tmp_path / "complete.bash"
    script.write_text(
        f"""
source <({STACKRACE} completion bash)
PATH={STACKRACE.parent}:$PATH
complete_line() {{
    COMP_LINE="$1"; COMP_POINT=${{#1}}
    read -ra COMP_WORDS <<< "$1"
    [[ "$1" == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))
    COMPREPLY=()
    _python_argcomplete stackrace
    echo "${{COMPREPLY[*]}}"
}}
complete_line "stackrace ser"
complete_line "stackrace verify uvic"
complete_line "stackrace bench --stacks uvicorn,gunicorn-sy"
complete_line "stackrace load --no-pro"
complete_line "stackrace completion f"
"""
    )
    r = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60)
    lines = [line.strip() for line in r.stdout.splitlines()]
    assert lines == [
        "serve",
        "uvicorn uvicorn-tls",
        "uvicorn,gunicorn-sync",
        "--no-progress",
        "fish",
    ], (r.stdout, r.stderr)


@pytest.mark.parametrize(("shell", "mark"), [("zsh", "compdef"), ("fish", "complete --command")])
def test_zsh_and_fish_scripts(shell: str, mark: str) -> None:
    r = run_cli("completion", shell)
    assert r.returncode == 0 and mark in r.stdout and "stackrace" in r.stdout


def test_no_color_is_honoured() -> None:
    # FORCE_COLOR makes rich colour a pipe as it would a terminal
    coloured = run_cli("stacks", env={"FORCE_COLOR": "1"})
    assert COLOUR.search(coloured.stdout), "the check must see colours when there are some"
    plain = run_cli("stacks", env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert plain.returncode == 0 and "stack" in plain.stdout
    assert not COLOUR.search(plain.stdout), plain.stdout[:500]


def test_load_shows_progress_on_a_terminal_unless_told_not_to(server: TestServer) -> None:
    def stderr_on_a_terminal(*extra: str) -> bytes:
        master, slave = os.openpty()
        try:
            proc = subprocess.Popen(
                [str(STACKRACE), "load", server.url("/hello"), "-c", "2", "-d", "1s", *extra],
                stdout=subprocess.DEVNULL,
                stderr=slave,
                stdin=subprocess.DEVNULL,
            )
            os.close(slave)
            out = bytearray()
            while True:
                try:
                    chunk = os.read(master, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                out.extend(chunk)
            assert proc.wait(timeout=30) == 0
            return bytes(out)
        finally:
            os.close(master)

    assert b"req/s" in stderr_on_a_terminal()
    assert b"req/s" not in stderr_on_a_terminal("--no-progress")
