"""Shared helpers for tests: the real CLI, the test stacks file, whether MariaDB is
here, free ports, the test server process and its counters, waits.

One of each, here, so that no test file grows its own copy (tests/README.md lists them).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from stackrace.db.errors import DbError
from stackrace.db.paths import find_binary

ROOT = Path(__file__).parents[1]
TESTSERVER = Path(__file__).parent / "servers" / "testserver.py"
# the stacks the tests start by name (`plain`, `forking`, `crashing`, …): small real
# servers from tests/servers; run with `--stacks-file STACKS_FIXTURE`
STACKS_FIXTURE = Path(__file__).parent / "stacks_fixture.toml"
# the real `stackrace` command, as a user runs it, from this checkout's environment
CLI = [sys.executable, "-m", "stackrace.cli"]
# the same, as the console script the package installs (what a shell line names)
STACKRACE = Path(sys.executable).parent / "stackrace"


def blocking(ms: int) -> dict[str, str]:
    """The environment (for `run_cli(..., env=)`) in which every test server a run starts
    (tests/servers/testserver.py, so the fixture's `plain`) blocks `ms` ms in each /hello:
    a slow stack under the same name, as a baseline and a regression of one stack are."""
    return {"TESTSERVER_BLOCK_MS": str(ms)}


def _have_mariadb() -> bool:
    try:
        find_binary("mariadbd")
    except DbError:
        return False
    return True


# the tests that start a private MariaDB skip, saying why, where mariadb-server is not
# installed (scripts/setup.sh installs it: CI never skips them)
needs_mariadb = pytest.mark.skipif(
    not _have_mariadb(), reason="mariadb-server is not installed (scripts/setup.sh installs it)"
)


def run_cli(
    *args: str,
    timeout: float = 120,
    cwd: Path | None = ROOT,
    env: dict[str, str] | None = None,
    quiet_core: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run `stackrace ARGS` to the end; stdin is closed, output captured as text, and
    `env` is added to this process's environment. `quiet_core`: the run takes a core
    (`take_quiet_core`): for a test that judges a latency against a target a few
    milliseconds from the truth."""
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **env} if env else None,
        cwd=cwd,
        preexec_fn=take_quiet_core if quiet_core else None,
    )


def take_quiet_core() -> None:
    """In a child before it runs its command: round-robin real-time scheduling (priority
    1), which its engines and servers inherit. A real-time task runs before every
    ordinary one, so the other test lanes (./dev test runs four on two cores) wait for
    it instead of it for them: it has a quiet core whenever it wants one, as on an idle
    machine, without a core held idle while it sleeps. The run's own work is light
    (these searches hold requests in sleeps), and the kernel keeps 5 % of each second
    for ordinary tasks whatever happens (sched_rt_runtime_us).

    The ways tried before did not hold: nice -10 (autogroups weigh a nice value only
    inside its session: CI's capacity search, at nice -10, read "the servers got a core
    31 % of the time they wanted one" and answered c=43 for a server that meets c=45 and
    more); a cgroup CPU quota for the others held here but not on the CI machine
    (tests/helpers.py `core_taken`). Without CAP_SYS_NICE it runs as it is."""
    with contextlib.suppress(OSError):
        os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(1))


@contextlib.contextmanager
def never_accepting_listener() -> Iterator[int]:
    """A loopback port whose listener never accepts, with a backlog of one: the kernel
    completes one or two handshakes and drops every other SYN, so those clients stay in
    connect (a server whose accept queue is full). Yields the port."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        yield listener.getsockname()[1]


def free_port() -> int:
    """A free loopback port, picked as stackrace picks its stacks' (outside the range
    outgoing connections take theirs from: stackrace.base.ports)."""
    from stackrace.base.ports import free_port as free_listen_port

    return free_listen_port()


class TestServer:
    """A test server script (by default tests/servers/testserver.py) in its own process on
    a free loopback port; the script prints "ready" once it listens."""

    __test__ = False  # not a test class

    def __init__(self, script: Path = TESTSERVER, *args: str) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, str(script), str(self.port), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.strip() == b"ready", line

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def get(self, path: str, timeout: float = 10) -> bytes:
        with urllib.request.urlopen(self.url(path), timeout=timeout) as r:
            return r.read()

    def stats(self) -> dict:
        return json.loads(self.get("/_stats"))

    def reset(self) -> None:
        self.get("/_reset")

    def clients(self) -> int:
        """Connections to this server still open on the client's side, as the kernel has
        them (ESTABLISHED or connecting; TIME_WAIT is closed). A count that goes down is
        checked here, not with stats()["open"]: the server's own count was seen to keep
        connections the engine had closed (reset, gone from `ss`) for seconds, in about
        one run of tests/integration/test_engine.py in three on a busy machine."""
        # ss filters in the kernel (inet_diag): psutil reads every socket of the
        # machine, 0.35 s with the tens of thousands in TIME_WAIT a suite leaves
        out = subprocess.run(
            ["ss", "-Htn", "state", "established", "state", "syn-sent",
             f"( dport = :{self.port} )"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        return sum(1 for line in out.splitlines() if line.strip())

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class TlsTestServer(TestServer):
    """The test server over HTTPS (`--tls`), with `cert`'s certificate and key, speaking
    TLS up to `highest` ("1.2" or "1.3"); its control paths are asked over TLS too."""

    __test__ = False

    def __init__(self, cert: Path, key: Path, highest: str = "1.3") -> None:
        super().__init__(TESTSERVER, "--tls", f"{cert},{key}", "--tls-max", highest)
        self._ctx = ssl.create_default_context(cafile=str(cert))

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def get(self, path: str, timeout: float = 10) -> bytes:
        with urllib.request.urlopen(self.url(path), timeout=timeout, context=self._ctx) as r:
            return r.read()


def wait_for(predicate: Callable[[], object], timeout: float = 5.0, step: float = 0.05) -> bool:
    """Whether `predicate()` held within `timeout` seconds (asked every `step`)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


async def until(predicate: Callable[[], object], timeout: float, step: float = 0.1) -> bool:
    """`wait_for` inside an event loop: the loop (the app, the launcher) runs meanwhile."""
    import asyncio

    end = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < end:
        if predicate():
            return True
        await asyncio.sleep(step)
    return bool(predicate())


_HOG = """
import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
busy, idle = float(sys.argv[2]), float(sys.argv[3])
print("ready", flush=True)
while True:
    end = time.perf_counter() + busy
    while time.perf_counter() < end:
        pass
    time.sleep(idle)
"""


@contextlib.contextmanager
def core_taken(pid: int, share: float, period: float = 0.02) -> Iterator[None]:
    """Leave process `pid` `1 - share` of one core for the block: pin it to the last core
    and run there a real-time (SCHED_FIFO) loop that spins `share` of every `period` and
    sleeps the rest. A real-time task always runs before an ordinary one, so `pid` waits
    on the run queue while the loop spins: the wait for a core a busy machine causes,
    the same on every machine. Skips where a real-time task cannot be made (no
    CAP_SYS_NICE).

    Two ways came first and failed: a busy loop at nice -10 flaked (autogroups weigh a
    nice value only inside its session) and a cgroup CPU quota held here but not on the
    CI machine, where the engine, throttled, did not show the wait."""
    cpu = max(os.sched_getaffinity(0))
    before = os.sched_getaffinity(pid)
    hog = subprocess.Popen(
        [sys.executable, "-c", _HOG, str(cpu), str(share * period), str((1 - share) * period)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert hog.stdout is not None and hog.stderr is not None
        if hog.stdout.readline().strip() != "ready":
            hog.wait(5)
            pytest.skip(f"cannot run a real-time task here: {hog.stderr.read().strip()[-200:]}")
        os.sched_setaffinity(pid, {cpu})
        yield
    finally:
        hog.kill()
        hog.wait()
        with contextlib.suppress(OSError):
            os.sched_setaffinity(pid, before)
