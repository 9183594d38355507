"""The fast tier's guard (tests/costguard.py), tried on tests of its own: each way to
start a process or open a connection fails the test, even when the code under test
swallows the error; what touches nothing outside the process passes."""

from __future__ import annotations

import pytest

CONFTEST = """
from tests.costguard import pytest_runtest_call, pytest_runtest_setup, pytest_runtest_teardown
"""

CALLS = """
import asyncio, os, socket, subprocess, sys, urllib.request
import multiprocessing
import uvloop
import pytest

def test_subprocess_run():
    subprocess.run(["true"])

def test_os_system():
    os.system("true")

def test_fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)

def test_multiprocessing_spawn():
    ctx = multiprocessing.get_context("spawn")
    p = ctx.Process(target=print)
    p.start()
    p.join()

def test_asyncio_subprocess():
    async def go():
        proc = await asyncio.create_subprocess_exec("true")
        await proc.wait()
    asyncio.run(go())

def test_uvloop_subprocess():
    async def go():
        proc = await asyncio.create_subprocess_exec("true")
        await proc.wait()
    uvloop.run(go())

def test_socket_connect():
    socket.create_connection(("127.0.0.1", 9), timeout=1)

def test_urlopen():
    urllib.request.urlopen("http://127.0.0.1:9/", timeout=1)

def test_listen():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()

def test_asyncio_open_connection():
    asyncio.run(asyncio.open_connection("127.0.0.1", 9))

def test_uvloop_open_connection():
    uvloop.run(asyncio.open_connection("127.0.0.1", 9))

def test_uvloop_server():
    async def go():
        await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    uvloop.run(go())

def test_swallowed():
    try:
        subprocess.run(["true"])
    except Exception:
        pass  # as a launcher that turns a failed start into a message would

@pytest.fixture
def server_fixture():
    subprocess.Popen(["true"]).wait()
    yield

def test_in_a_fixture(server_fixture):
    pass
"""

ALLOWED = """
import asyncio, socket
import uvloop

def test_an_event_loop_and_its_socketpair():
    asyncio.run(asyncio.sleep(0))
    uvloop.run(asyncio.sleep(0))
    a, b = socket.socketpair()
    a.sendall(b"x")
    assert b.recv(1) == b"x"
    a.close(); b.close()

def test_a_free_port_is_found_by_binding():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        assert s.getsockname()[1] > 0
"""


def test_every_way_out_fails_the_test_and_the_rest_passes(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_calls=CALLS, test_allowed=ALLOWED)
    run = pytester.inline_run(
        "-p", "no:cacheprovider", "-o", "asyncio_default_fixture_loop_scope=function"
    )
    failures = {r.nodeid.split("::")[-1]: r.longreprtext for r in run.getfailures()}
    calls = {line[4:].split("(")[0] for line in CALLS.splitlines() if line.startswith("def test_")}
    assert set(failures) == calls
    run.assertoutcome(passed=2, failed=len(calls))  # the fixture's fails its set-up
    # swallowed by the code under test, the call still fails the test, naming itself
    assert "subprocess.Popen(['true'])" in failures["test_swallowed"]
    assert "tests/unit starts no process" in failures["test_swallowed"]
    assert "socket.listen" in failures["test_listen"]
