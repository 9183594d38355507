"""DbWatch against a real private MariaDB that the tests kill, freeze and restart."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Iterator

import pytest

from stackrace.db import DbSettings, ManagedMariaDB, parse_dsn
from stackrace.db.watch import DbWatch
from tests.helpers import free_port, needs_mariadb, run_cli

pytestmark = needs_mariadb


@pytest.fixture(scope="module")
def shared_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagedMariaDB]:
    """One private MariaDB for the tests that leave its server running as it was (they
    change only its tables; the one that needs none drops them first): a start and a
    wipe cost ~0.75 CPU-s. Started here, in the main thread, which a scoped server's parent-death
    signal is tied to; the tests that kill, stop or restart the server have their own
    (`private_db`)."""
    db = ManagedMariaDB(tmp_path_factory.mktemp("watch") / "db", free_port(), scoped=True)
    try:
        db.up()
        yield db
    finally:
        db.reset(wipe=True)


async def until(predicate: Callable[[], bool], timeout: float) -> float:
    """Seconds until `predicate()` held; fails the test after `timeout`."""
    t0 = time.monotonic()
    while not predicate():
        assert time.monotonic() - t0 < timeout, "timed out"
        await asyncio.sleep(0.02)
    return time.monotonic() - t0


def over_tcp(db: ManagedMariaDB) -> DbSettings:
    """The settings an app (or an external server's DSN) gives: TCP, no socket."""
    s = db.settings
    return parse_dsn(f"mysql://{s.user}:{s.password}@127.0.0.1:{s.port}/{s.database}")


async def test_killed_database_is_down_then_restarted(private_db: ManagedMariaDB) -> None:
    """SIGKILL the server: down within about a poll; start it again: "restarted", with
    one closed interval covering the outage; a level inside it is marked."""
    await private_db.up_async()
    changes: list[str] = []
    async with DbWatch(over_tcp(private_db), on_change=lambda w: changes.append(w.state)) as w:
        assert w.state == "up" and w.intervals == []
        await asyncio.sleep(0.6)
        level_start = time.monotonic()
        pid = private_db.pid()
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        took = await until(lambda: w.state == "down", 3.0)
        assert took < 1.5  # about twice a second
        assert w.since >= killed and "refused" in w.describe()
        (open_interval,) = w.intervals
        assert open_interval.end is None and open_interval.start <= killed
        await asyncio.sleep(0.5)
        level_end = time.monotonic()
        # (a poll may see the server answer before up_async returns: it accepts logins
        # before stackrace has finished checking its accounts)
        restarting = time.monotonic()
        await private_db.up_async()
        await until(lambda: w.state != "down", 3.0)
        assert w.state == "restarted"
        (interval,) = w.intervals
        assert interval.restarted and interval.end is not None
        assert interval.start <= killed and restarting <= interval.end <= time.monotonic()
        assert w.down_during(level_start, level_end) == [interval]
        after = interval.end + 0.01  # after a poll saw it back
        assert w.down_during(after, after + 0.01) == []
        assert w.down_during(level_start - 0.6, level_start - 0.55) == []  # before the kill
    assert changes == ["up", "down", "restarted"]  # (unknown → up at the first poll)


async def test_restart_between_two_polls_is_caught(private_db: ManagedMariaDB) -> None:
    """A restart no poll saw (down and up again between two polls) is still recorded."""
    await private_db.up_async()
    w = DbWatch(private_db.settings, interval=60)  # polled by hand below
    try:
        assert await w.poll() == "up"
        await asyncio.to_thread(private_db.down)
        await private_db.up_async()
        assert await w.poll() == "restarted"
        (interval,) = w.intervals
        assert interval.restarted and interval.end is not None
        assert interval.cause == "restarted between two polls"
        assert await w.poll() == "restarted"  # sticky: the state says it happened
        assert len(w.intervals) == 1
    finally:
        await w.stop()


async def test_frozen_database_is_down_then_up_not_restarted(private_db: ManagedMariaDB) -> None:
    """SIGSTOP: the server accepts nothing and answers nothing; after `timeout` it is down.
    SIGCONT: the same server answers again — "up", not "restarted"."""
    await private_db.up_async()
    pid = private_db.pid()
    assert pid is not None
    async with DbWatch(private_db.settings, timeout=0.5) as w:
        os.kill(pid, signal.SIGSTOP)
        try:
            await until(lambda: w.state == "down", 4.0)
            assert "no answer" in w.last_error
        finally:
            os.kill(pid, signal.SIGCONT)
        await until(lambda: w.state != "down", 4.0)
        assert w.state == "up" and w.restarts == 0
        (interval,) = w.intervals
        assert not interval.restarted and interval.end is not None


async def test_a_database_without_the_table_is_not_called_damaged(
    shared_db: ManagedMariaDB,
) -> None:
    """An unseeded database (or an external one used for something else) never had the
    table: nothing to follow, nothing damaged."""
    await asyncio.to_thread(shared_db.reset)  # (the first here: nothing to drop)
    w = DbWatch(shared_db.settings, interval=60)
    try:
        assert await w.poll() == "up"
        assert await w.poll() == "up" and w.intervals == []
    finally:
        await w.stop()


async def test_a_server_that_refuses_the_login_is_up_not_down(shared_db: ManagedMariaDB) -> None:
    """A wrong password is the server answering: the database is alive (the load's own
    failures say the rest); the error is kept for display."""
    s = shared_db.settings
    wrong = DbSettings(host=s.host, port=s.port, user=s.user, password="nope", database=s.database)
    async with DbWatch(wrong) as w:
        assert w.state == "up" and "Access denied" in w.last_error
        assert "Access denied" in w.describe()
        assert w.intervals == []


async def test_tables_dropped_by_db_reset_are_a_database_fault(shared_db: ManagedMariaDB) -> None:
    """`stackrace db reset` (the real command) drops the workload's table while the server
    stays up: "damaged", with an open interval that marks a level measured then; a seed
    makes the table again and ends it. Polled by hand: no timing to wait for."""
    await asyncio.to_thread(shared_db.seed, 1000)
    w = DbWatch(shared_db.settings, interval=60)
    try:
        assert await w.poll() == "up" and not w.faulty
        level_start = time.monotonic()
        r = await asyncio.to_thread(run_cli, "db", "reset", "--dir", str(shared_db.root))
        assert r.returncode == 0, r.stderr
        assert await w.poll() == "damaged" and w.faulty
        assert "table test is gone" in w.describe()
        (interval,) = w.intervals
        assert interval.damaged and interval.end is None and interval.kind == "damaged"
        assert w.down_during(level_start, time.monotonic()) == [interval]
        assert await w.poll() == "damaged" and len(w.intervals) == 1  # one fault, still on
        await asyncio.to_thread(shared_db.seed, 1000)
        assert await w.poll() == "up" and not w.faulty
        (interval,) = w.intervals
        assert interval.end is not None and interval.damaged
    finally:
        await w.stop()


async def test_a_table_dropped_and_made_again_between_polls_is_caught(
    shared_db: ManagedMariaDB,
) -> None:
    """A reset and a new seed that no poll saw (the table's creation time changed): the
    interval is recorded all the same, and the watch is up again."""
    await asyncio.to_thread(shared_db.seed, 1000)
    w = DbWatch(shared_db.settings, interval=60)
    try:
        assert await w.poll() == "up"
        await asyncio.sleep(1.1)  # the creation time has a resolution of one second
        await asyncio.to_thread(shared_db.reset)
        await asyncio.to_thread(shared_db.seed, 1000)
        assert await w.poll() == "up"
        (interval,) = w.intervals
        assert interval.damaged and interval.end is not None
        assert "dropped and made again" in interval.cause
    finally:
        await w.stop()
