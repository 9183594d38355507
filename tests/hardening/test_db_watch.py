"""DbWatch against a real private MariaDB that the tests kill, freeze and restart."""

from __future__ import annotations

import asyncio
import os
import signal
import time

from stackrace.db import DbSettings, ManagedMariaDB, parse_dsn
from stackrace.db.watch import DbWatch
from tests.hardening.conftest import needs_mariadb

pytestmark = needs_mariadb


async def until(predicate, timeout: float) -> float:  # type: ignore[no-untyped-def]
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
        await private_db.up_async()
        back = time.monotonic()
        await until(lambda: w.state != "down", 3.0)
        assert w.state == "restarted"
        (interval,) = w.intervals
        assert interval.restarted and interval.end is not None
        assert interval.start <= killed and back <= interval.end <= time.monotonic()
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


async def test_a_server_that_refuses_the_login_is_up_not_down(private_db: ManagedMariaDB) -> None:
    """A wrong password is the server answering: the database is alive (the load's own
    failures say the rest); the error is kept for display."""
    await private_db.up_async()
    s = private_db.settings
    wrong = DbSettings(host=s.host, port=s.port, user=s.user, password="nope", database=s.database)
    async with DbWatch(wrong) as w:
        assert w.state == "up" and "Access denied" in w.last_error
        assert "Access denied" in w.describe()
        assert w.intervals == []
