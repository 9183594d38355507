"""An app's own listener beyond loopback is named: a stack whose app binds 0.0.0.0
itself (tests/servers/wide_server.py) is said to, in the run's outputs and its
progress, while the port stackrace gave it stays on 127.0.0.1. The real CLI, a real
server, the kernel's listen table."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

from stackrace.stacks.listen import exposed
from tests.helpers import ROOT, free_port, run_cli

pytestmark = pytest.mark.slow


def test_listen_exposed_matches_sockets_to_their_process() -> None:
    import os

    wide = socket.socket()
    wide.bind(("0.0.0.0", 0))
    wide.listen()
    wide6 = socket.socket(socket.AF_INET6)
    wide6.bind(("::", 0))
    wide6.listen()
    local = socket.socket()
    local.bind(("127.0.0.1", 0))
    local.listen()
    with wide, wide6, local:
        found = exposed([os.getpid()])
        assert f"0.0.0.0:{wide.getsockname()[1]}" in found
        assert f"[::]:{wide6.getsockname()[1]}" in found
        assert not any(str(local.getsockname()[1]) in a for a in found)
        assert exposed([os.getpid()], allowed="0.0.0.0") == [f"[::]:{wide6.getsockname()[1]}"]
    assert exposed([]) == []


def test_a_stack_that_binds_beyond_loopback_is_named_in_the_outputs(tmp_path: Path) -> None:
    port = free_port()
    stacks = tmp_path / "stacks.toml"
    server = ROOT / "tests" / "servers" / "wide_server.py"
    stacks.write_text(
        f'[stacks.wide]\ncommand = ["{sys.executable}", "{server}", "{{port}}", "{port}"]\n'
    )
    out = tmp_path / "run.json"
    r = run_cli(
        "--stacks-file",
        str(stacks),
        "bench",
        "--stacks",
        "wide",
        "--duration",
        "0.5s",
        "--warmup",
        "0s",
        "--concurrency",
        "1",
        "--json",
        str(out),
        env={"STACKRACE_HOME": str(tmp_path / "home")},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    said = f"wide listens beyond loopback on 0.0.0.0:{port}"
    assert said in r.stderr
    assert said in r.stdout  # the table's notes
    assert any(said in n for n in json.loads(out.read_text())["notes"])
