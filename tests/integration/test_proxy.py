"""nginx-proxy, a stack in front of another: what nginx sends its backend with upstream
keep-alive off (the default, as in the experiments) and on, and a backend that fails.

The backend is tests/servers/testserver.py (its /headers echoes the request head nginx
sent), added to the real stacks so the real nginx-proxy block and template are used.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from stackrace.stacks import probe
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.definition import StackDef
from stackrace.stacks.launcher import Launcher
from stackrace.stacks.running import LaunchError
from stackrace.stacks.variants import resolve
from tests.conftest_stacks import live, real_stack
from tests.helpers import ROOT


def stacks_with_test_backends() -> dict[str, StackDef]:
    stacks = dict(load_stacks())
    stacks["echo"] = msgspec.convert(
        {
            "title": "test server",
            "language": "python",
            "family": "async",
            "command": ["{python}", f"{ROOT}/tests/servers/testserver.py", "{port}"],
        },
        StackDef,
    )
    stacks["broken"] = msgspec.convert(
        {
            "title": "a backend that dies",
            "language": "python",
            "family": "sync",
            "command": ["{python}", "-c", "import sys; print('backend broke'); sys.exit(3)"],
        },
        StackDef,
    )
    return stacks


@pytest.mark.parametrize(
    "variant,request_line,connection",
    [
        ("nginx-proxy:backend=echo", "GET /headers HTTP/1.0", "connection: close"),
        ("nginx-proxy:backend=echo,upstream_keepalive=on", "GET /headers HTTP/1.1", None),
    ],
)
async def test_nginx_proxy_keeps_upstream_connections_alive_only_when_asked(
    variant: str, request_line: str, connection: str | None, tmp_path: Path
) -> None:
    real_stack("nginx-proxy")  # nginx is installed
    stack = resolve(variant, stacks_with_test_backends())
    async with Launcher(tmp_path) as launcher:
        rs = await launcher.start(stack)
        heads = [(await probe.get("127.0.0.1", rs.port, "/headers")).body for _ in range(3)]
        pids = rs.all_pids()
    head = heads[-1].decode().lower()
    assert head.startswith(request_line.lower()), head
    assert f"host: 127.0.0.1:{rs.port}" in head  # the client's Host, not "backend"
    # HTTP/1.0 with "Connection: close": the backend closes after each response, so every
    # request is a new connection; HTTP/1.1 without it: the upstream pool reuses them
    if connection:
        assert connection in head
    else:
        assert "connection:" not in head
    assert live(pids) == []  # nginx and its backend are gone


async def test_a_backend_that_fails_is_reported_with_its_log(tmp_path: Path) -> None:
    real_stack("nginx-proxy")
    stack = resolve("nginx-proxy:backend=broken", stacks_with_test_backends())
    async with Launcher(tmp_path) as launcher:
        with pytest.raises(LaunchError) as exc:
            await launcher.start(stack)
    text = str(exc.value)
    assert "nginx-proxy:backend=broken" in text and "exited with code 3" in text
    assert "backend broke" in text  # the log tail
