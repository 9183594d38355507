"""/db in every app, against a private MariaDB of the test's own (a temp dir, a free port).

1. Every stack that serves /db passes `stackrace verify`'s check (check_db): plausible
   sums, six decimals, text/plain, framing, TechEmpower's query clamping, and the server's
   Com_select grows by exactly the queries owed.
2. One stack per driver and connection model, under load on /db, started while the
   database is down and then living through a database restart: failures are counted,
   the engine and the stacks keep running, and /db succeeds again each time the server is
   back, without restarting anything.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from stackrace.db import ManagedMariaDB, db_env
from stackrace.engine.client import Engine
from stackrace.engine.model import EngineSettings, EngineSnapshot, TargetSpec
from stackrace.settings.workloads import WORKLOADS
from stackrace.stacks import probe
from stackrace.stacks.availability import availability
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.definition import Stack
from stackrace.stacks.launcher import Launcher
from stackrace.stacks.running import READY, RunningStack
from stackrace.stacks.variants import resolve
from stackrace.stacks.verify import check_db
from tests.helpers import free_port, needs_mariadb

pytestmark = needs_mariadb

ROWS = 1_000_000
STACKS = load_stacks()
DB_STACKS = [name for name, spec in STACKS.items() if spec.db]

# one stack per way of holding connections: PyMySQL per process (and Connection: close),
# per thread, a pool under gevent; an aiomysql pool; persistent mysqli, plain and prepared;
# database/sql's pool; a mysql2 pool
OUTAGE_STACKS = [
    "gunicorn-sync",
    "gunicorn-gthread",
    "gevent-pywsgi",
    "uvicorn",
    "php-fpm-nginx",
    "php-fpm-nginx-prepared",
    "go-nethttp",
    "node-http",
]
# what a request may meet while the database is away: a 503 from the app, a connection cut
# by a server, a body that is not a sum
OUTAGE_KINDS = {"http_status", "reset", "invalid_body"}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagedMariaDB]:
    inst = ManagedMariaDB(tmp_path_factory.mktemp("mariadb"), free_port(), scoped=True)
    inst.ensure_ready(rows=ROWS)
    yield inst
    inst.reset(wipe=True)


def real_stack(name: str) -> Stack:
    # CI runs scripts/setup.sh, which installs every stack: a missing one is a failure
    stack = resolve(name, STACKS)
    a = availability(stack)
    assert a.available, f"{name} is unavailable: {a.reason} (fix: {a.fix})"
    return stack


@pytest.mark.parametrize("name", DB_STACKS)
async def test_db_endpoint_meets_the_contract(
    name: str, db: ManagedMariaDB, tmp_path: Path
) -> None:
    stack = real_stack(name)
    async with Launcher(tmp_path, env=db_env(db.settings, ROWS)) as launcher:
        rs = await launcher.start(stack)
        conn = db.connection()
        try:
            tls = probe.trusting(rs.cert) if rs.cert is not None else None  # https stacks
            result = await check_db(rs.port, conn, tls=tls)
        finally:
            conn.close()
    assert result.ok, f"{name}: {result.problems}"


async def _until(
    engine: Engine, ok: Callable[[EngineSnapshot], bool], timeout: float, what: str
) -> EngineSnapshot:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        snap = engine.latest
        if snap is not None and ok(snap):
            return snap
        await asyncio.sleep(0.1)
    raise AssertionError(f"not within {timeout:.0f} s: {what}; last: {_brief(engine.latest)}")


def _brief(snap: EngineSnapshot | None) -> str:
    if snap is None:
        return "no snapshot"
    return "; ".join(f"{t.id} ok={t.total.ok} failures={t.total.failures}" for t in snap.targets)


def _ok(snap: EngineSnapshot) -> dict[str, int]:
    return {t.id: t.total.ok for t in snap.targets}


def _failed(snap: EngineSnapshot) -> dict[str, int]:
    return {t.id: t.total.failed for t in snap.targets}


async def _recovered(engine: Engine, since: dict[str, int], what: str) -> None:
    """Every target answers /db again: 30 good responses more, and a clean last interval."""

    def done(snap: EngineSnapshot) -> bool:
        return all(
            t.total.ok >= since[t.id] + 30 and t.interval.failed == 0 and t.interval.ok > 0
            for t in snap.targets
        )

    await _until(engine, done, 20.0, what)


async def _failing(engine: Engine, since: dict[str, int], what: str) -> EngineSnapshot:
    def done(snap: EngineSnapshot) -> bool:
        return all(t.total.failed >= since[t.id] + 3 for t in snap.targets)

    return await _until(engine, done, 15.0, what)


async def outage_cycle(db: ManagedMariaDB, names: list[str], run_root: Path) -> None:
    """Start the stacks with the database down, load /db, bring the database up, stop it
    and start it again under load; each time, the stacks fail and then recover alone."""
    stacks = [real_stack(n) for n in names]
    env = db_env(db.settings, ROWS)
    await asyncio.to_thread(db.down)
    async with Launcher(run_root, env=env) as launcher:
        # ready means /hello answers: the apps connect on the first /db request only
        running: list[RunningStack] = [await launcher.start(s) for s in stacks]
        check = WORKLOADS["db"].check(10)
        async with Engine(EngineSettings(timeout=10.0)) as engine:
            for s, rs in zip(stacks, running, strict=True):
                url = f"{rs.url}/db?queries=10"
                await engine.add_target(TargetSpec(id=s.name, url=url, check=check, concurrency=2))
            snap = await _failing(engine, dict.fromkeys(names, 0), "failures, database down")
            assert all(t.total.ok == 0 for t in snap.targets), _brief(snap)

            await db.up_async()
            await _recovered(engine, _ok(snap), "/db answers after the first start")

            up = engine.latest
            assert up is not None
            await asyncio.to_thread(db.down)
            await _failing(engine, _failed(up), "failures after the database stopped")
            down = engine.latest
            assert down is not None
            await db.up_async()
            await _recovered(engine, _ok(down), "/db answers after the restart")

            final = await engine.stop()
            assert not engine.errors, engine.errors
        assert final is not None
        for t in final.targets:
            assert set(t.total.failures) <= OUTAGE_KINDS, (t.id, t.total.failures)
        for rs in running:
            assert rs.state == READY, (rs.name, rs.state)


async def test_db_stacks_recover_from_a_database_restart_under_load(
    db: ManagedMariaDB, tmp_path: Path
) -> None:
    await outage_cycle(db, OUTAGE_STACKS, tmp_path)


@pytest.mark.parametrize(
    "variant,persistent",
    [
        ("php-fpm-nginx", "on"),
        ("php-fpm-nginx:persistent=off", "off"),
        ("php-fpm-nginx:workers=4", "on"),  # four children, each with its own connection
        ("php-fpm-nginx:workers=4,persistent=off", "off"),
    ],
)
async def test_verify_sees_whether_php_connects_per_request(
    variant: str, persistent: str, db: ManagedMariaDB, tmp_path: Path
) -> None:
    # measured from the database's own Connections counter, not from what the app says
    async with Launcher(tmp_path, env=db_env(db.settings, ROWS)) as launcher:
        rs = await launcher.start(real_stack(variant))
        conn = db.connection()
        try:
            result = await check_db(rs.port, conn, holders=rs.stack.workers)
        finally:
            conn.close()
    assert result.ok, result.problems
    assert result.measured == {"db_persistent": persistent}
