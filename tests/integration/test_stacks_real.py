"""Every stack in stacks.toml, started by the launcher one at a time, leaves nothing behind.

One test per stack, so a failure names the stack and shows its log: start it, check
/hello, /json and /io?ms=100 as `stackrace verify` does (status, Content-Type, framing,
exact body, the wait), stop it, and make sure nothing of it is left: no process, no
listener on its port. (tests/integration/test_verify_all.py runs the `stackrace verify`
command over them all, /db included.) CI installs every stack
(scripts/setup.sh), so an unavailable stack fails; see tests/conftest_stacks.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stackrace.stacks import probe
from stackrace.stacks.launcher import Launcher
from stackrace.stacks.running import READY, STOPPED
from stackrace.stacks.sampler import TreeSampler
from stackrace.stacks.verify import verify_port
from tests.conftest_stacks import (
    REAL_STACKS,
    live,
    port_is_free,
    processes_mentioning,
    real_stack,
)
from tests.helpers import wait_for

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", sorted(REAL_STACKS))
async def test_stack_serves_the_contract_and_leaves_nothing(name: str, tmp_path: Path) -> None:
    stack = real_stack(name)
    async with Launcher(tmp_path) as launcher:
        rs = await launcher.start(stack)
        assert rs.state == READY
        tls = probe.trusting(rs.cert) if rs.cert is not None else None  # https stacks
        checks = await verify_port(rs.port, tls=tls)
        sample = TreeSampler(rs.root_pids).sample()
        pids = rs.all_pids()
        await launcher.stop(rs)
        assert rs.state == STOPPED
    problems = [f"{c.endpoint}: {p}" for c in checks for p in c.problems]
    assert not problems, f"{name}: {problems}\n--- log ---\n{rs.log_tail(30)}"
    assert sample.processes >= 1 and sample.rss > 0
    assert live(pids) == [], f"{name}: left running: {live(pids)}"
    assert processes_mentioning(str(rs.run_dir)) == []
    assert wait_for(lambda: port_is_free(rs.port), 10.0), f"{name}: port {rs.port} still bound"
