from __future__ import annotations

import os
import resource
import signal
from collections.abc import Iterator

import msgspec
import pytest

from stackrace.db import ManagedMariaDB
from stackrace.db.instance import LAYOUT, InstanceMeta
from tests.helpers import TestServer, free_port

# pytester: tests/unit/test_costguard.py runs pytest sessions of its own, in-process
pytest_plugins = ("pytester",)

# A shell runs a command it puts in the background (`pytest ... &`, as ./dev's second
# lane was) with SIGINT ignored, and an ignored signal stays ignored across exec: every
# `stackrace` a test then starts ignored the Ctrl-C the test sent it (the db seed
# Ctrl-C tests failed in CI so, after 30 s). Tests send Ctrl-C on purpose; let them.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


_CPU_AT_SETUP = pytest.StashKey[float]()


def _cpu_s() -> float:
    """CPU-seconds of this pytest and of every process it (or a child of it) waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_CPU_AT_SETUP] = _cpu_s()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Each test's CPU-seconds (setup to teardown), a `cpu_s` property in ./dev test's
    JUnit files: the lanes are balanced by what a test costs the machine, not by its
    wall time, which on 2 shared cores is mostly the other lanes (bench/suite_times.py).
    A process is counted when it is waited for: servers and engines are, by the test or
    by the `stackrace` it ran; a session's MariaDB is counted in the test that stops it."""
    if call.when == "teardown" and _CPU_AT_SETUP in item.stash:
        item.user_properties.append(("cpu_s", f"{_cpu_s() - item.stash[_CPU_AT_SETUP]:.2f}"))
    yield


@pytest.fixture
def server():
    s = TestServer()
    yield s
    s.kill()


@pytest.fixture(scope="session", autouse=True)
def tests_own_run_locks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The runs this test session starts hold their run locks (race/core/runlocks.py) in a
    directory of its own: the other test lane, and the developer's own runs, share the
    cores on purpose and must not make `bench` refuse. Tests of the locks name a
    directory of their own (STACKRACE_LOCKS_DIR in the command's environment)."""
    saved = os.environ.get("STACKRACE_LOCKS_DIR")
    os.environ["STACKRACE_LOCKS_DIR"] = str(tmp_path_factory.mktemp("run-locks"))
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("STACKRACE_LOCKS_DIR", None)
        else:
            os.environ["STACKRACE_LOCKS_DIR"] = saved


@pytest.fixture(scope="session", autouse=True)
def tests_own_default_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Commands the tests run (`serve`, `bench --workload db`, the app) start "the" private
    MariaDB when they need one: make that an instance of this test session's own, on a
    free port, instead of the user's (~/.cache/stackrace/mariadb, port 13306). A test must
    not stop, remake or seed the user's instance, and two test runs on one machine must
    not share one. Nothing is installed unless a test needs it; it is wiped at the end.
    """
    root = tmp_path_factory.mktemp("default-db") / "mariadb"
    root.mkdir(mode=0o700)
    # An instance.json that is not provisioned holds only the port: the first `up`
    # installs a complete instance on that port (with passwords of its own).
    meta = InstanceMeta(port=free_port(), password="", admin_password="", layout=LAYOUT)
    fd = os.open(root / "instance.json", os.O_WRONLY | os.O_CREAT, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(msgspec.json.encode(meta))
    saved = os.environ.get("STACKRACE_DB_DIR")
    os.environ["STACKRACE_DB_DIR"] = str(root)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("STACKRACE_DB_DIR", None)
        else:
            os.environ["STACKRACE_DB_DIR"] = saved
        ManagedMariaDB(root).reset(wipe=True)  # its server files may be outside tmp
