"""Seeding table `test(id INT PRIMARY KEY, value DOUBLE)` with uniform random values in [0,1).

Fast path (MariaDB): one `INSERT ... SELECT seq, RAND(seed) FROM seq_1_to_N` built by the
server from its SEQUENCE engine: no CSV to generate, no file to ship, ~1.3 s for 1M MyISAM
rows on 2 cores (LOAD DATA LOCAL INFILE with a Python-made CSV took ~1.4 s to generate plus
~2-3.5 s to load). Fallback (servers without SEQUENCE, e.g. MySQL): batched multi-row INSERTs.

Idempotent: table `seed_meta` records rows, engine and seed with `done` written last, so a
seed interrupted half-way (done = 0) is seen and redone, and a completed one is skipped.

**Ctrl-C stops the server too.** The INSERT runs on the server: a client that stops
reading leaves it inserting (50 M rows went on growing the data directory by gigabytes,
and `db reset` hung behind it). So an interrupt during the fill opens a second
connection, sends `KILL QUERY` for the seeding connection's statement, waits until the
server has ended it (InnoDB rolls the rows back, MyISAM keeps those written), closes the
seeding connection (which releases the seed lock), and raises `SeedInterrupted` saying
what table `test` holds now: seed_meta still says `done = 0`, so the next `db seed`
makes it again and `db reset` drops it.

**Space is checked first.** A seed needs about `BYTES_PER_ROW[engine]` a row on the
server's disk (measured on MariaDB 10.11: MyISAM 23-24 B, InnoDB ~71 B with the undo log
the one INSERT grows ibdata1 by, which does not shrink afterwards; plus a margin), and
`seed` refuses before anything is written when the caller says the free space is less
(`free_bytes`: the private instance's data directory; an existing server's when its
data directory is on this machine).
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import msgspec

from stackrace.db.admin import closing, query
from stackrace.db.errors import DbError, SeedInterrupted

if TYPE_CHECKING:  # a hint: the driver is imported where it is used (admin.connect)
    import pymysql

Engine = Literal["myisam", "innodb"]
ENGINES: tuple[Engine, ...] = ("myisam", "innodb")
DEFAULT_ROWS = 1_000_000
DEFAULT_SEED = 42

_LOCK = "stackrace_seed"
_FALLBACK_BATCH = 5_000
# disk a row takes on the server, with a margin (module docstring), and a fixed part
BYTES_PER_ROW: dict[str, int] = {"myisam": 28, "innodb": 80}
_FIXED_BYTES = 64 << 20
# how long an interrupted seed waits for the server to end its statement (a MyISAM
# insert stops at once; an InnoDB one rolls its rows back first, which may take longer:
# then the line says so rather than keep the user waiting)
_KILL_WAIT_S = 10.0


def estimate_bytes(rows: int, engine: str) -> int:
    """About how much disk a seed of `rows` rows takes on the server."""
    return _FIXED_BYTES + rows * BYTES_PER_ROW[normalize_engine(engine)]


class SeedState(msgspec.Struct, kw_only=True):
    """What seed_meta says: `done` False means a seed started and never finished."""

    rows: int
    engine: str
    seed: int
    done: bool
    seconds: float | None


class SeedResult(msgspec.Struct, kw_only=True):
    rows: int
    engine: str
    skipped: bool  # already seeded with these parameters
    redone: bool  # an interrupted seed was found and replaced
    seconds: float
    method: str  # "sequence", "insert" or "none"


def normalize_engine(engine: str) -> Engine:
    e = engine.strip().lower()
    if e not in ENGINES:
        raise DbError(f"unknown storage engine {engine!r}: use myisam or innodb")
    return e


def seed_state(conn: pymysql.connections.Connection) -> SeedState | None:
    """The recorded seed, or None when there is none (no table or no row)."""
    if not _table_exists(conn, "seed_meta"):
        return None
    rows = query(conn, "SELECT `rows`, engine, seed, done, seconds FROM seed_meta WHERE id = 1")
    if not rows:
        return None
    n, engine, seed, done, seconds = rows[0]
    return SeedState(
        rows=int(n),
        engine=str(engine),
        seed=int(seed),
        done=bool(done),
        seconds=None if seconds is None else float(seconds),
    )


def seed(
    conn: pymysql.connections.Connection,
    rows: int = DEFAULT_ROWS,
    engine: str = "myisam",
    *,
    random_seed: int = DEFAULT_SEED,
    force: bool = False,
    connect: Callable[[], pymysql.connections.Connection] | None = None,
    free_bytes: tuple[str, int] | None = None,
) -> SeedResult:
    """Make table `test` hold `rows` rows in `engine`, unless a completed seed already did.

    `connect`: a second connection's maker, to stop the server's statement on Ctrl-C
    (SeedInterrupted); `free_bytes`: (directory, bytes free there) of the server's data,
    checked against `estimate_bytes` before anything is written."""
    eng = normalize_engine(engine)
    if rows < 10:
        raise DbError(f"--rows must be at least 10 (each query reads 10 rows), got {rows}")
    if rows > 2**31 - 1:
        raise DbError(f"--rows must fit an INT primary key, got {rows}")
    if free_bytes is not None:
        where, free = free_bytes
        need = estimate_bytes(rows, eng)
        if need > free:
            raise DbError(
                f"--rows {rows:,} needs about {_gb(need)} in {where} ({eng}: ~"
                f"{BYTES_PER_ROW[eng]} bytes a row) and {_gb(free)} are free: seed fewer "
                "rows, or free some space"
            )
    t0 = time.monotonic()
    # one seeder at a time: two would drop each other's table half-way
    got = query(conn, "SELECT GET_LOCK(%s, 60)", (_LOCK,))[0][0]
    if got != 1:
        raise DbError("another seed of this database is still running (waited 60 s)")
    try:
        state = seed_state(conn)
        _refuse_foreign_table(conn, state)
        if not force and state is not None and state.done and _matches(conn, state, rows, eng):
            return SeedResult(
                rows=rows,
                engine=eng,
                skipped=True,
                redone=False,
                seconds=time.monotonic() - t0,
                method="none",
            )
        redone = state is not None and not state.done
        _create_meta(conn)
        # the in-progress record goes first, `done` last: a crash in between is detectable
        query(
            conn,
            "REPLACE INTO seed_meta (id, `rows`, engine, seed, done, started_at) "
            "VALUES (1, %s, %s, %s, 0, NOW(6))",
            (rows, eng, random_seed),
        )
        query(conn, "DROP TABLE IF EXISTS test")
        query(
            conn,
            f"CREATE TABLE test (id INT NOT NULL PRIMARY KEY, value DOUBLE NOT NULL) ENGINE={eng}",
        )
        try:
            method = _fill(conn, rows, random_seed)
        except KeyboardInterrupt:
            raise _stop_on_server(conn, connect, rows, eng) from None
        count = int(query(conn, "SELECT COUNT(*) FROM test")[0][0])
        if count != rows:
            raise DbError(f"seed wrote {count} rows instead of {rows}")
        seconds = time.monotonic() - t0
        query(conn, "UPDATE seed_meta SET done = 1, seconds = %s WHERE id = 1", (seconds,))
        return SeedResult(
            rows=rows, engine=eng, skipped=False, redone=redone, seconds=seconds, method=method
        )
    finally:
        if conn.open:  # (an interrupted seed's connection was closed: its lock went with it)
            query(conn, "SELECT RELEASE_LOCK(%s)", (_LOCK,))


def _gb(n: int) -> str:
    return f"{n / 1e9:,.1f} GB"


def _stop_on_server(
    conn: pymysql.connections.Connection,
    connect: Callable[[], pymysql.connections.Connection] | None,
    rows: int,
    engine: str,
) -> SeedInterrupted:
    """Ctrl-C in the middle of the fill: KILL QUERY on the seeding connection's
    statement, wait until the server has ended it, close that connection, and say what
    table `test` holds (module docstring)."""
    thread = conn.thread_id()
    with contextlib.suppress(Exception):
        conn.close()  # mid-answer: it closes its socket whatever the quit message does
    if connect is None:
        return SeedInterrupted(
            "interrupted: the seed's statement may still run on the server (no second "
            "connection to stop it); `stackrace db seed` makes table test again"
        )
    try:
        with connect() as other:
            query(other, "KILL QUERY %s", (thread,))
            end = time.monotonic() + _KILL_WAIT_S
            while time.monotonic() < end and _running(other, thread):
                time.sleep(0.1)
            still = _running(other, thread)
            held = None if still else int(query(other, "SELECT COUNT(*) FROM test")[0][0])
    except KeyboardInterrupt:
        return SeedInterrupted(
            "interrupted: the insert was told to stop (KILL QUERY) and the server is "
            "ending it; table test is marked unfinished (`stackrace db seed` makes it "
            "again, `stackrace db reset` drops it)"
        )
    except DbError as exc:
        return SeedInterrupted(f"interrupted; stopping the insert on the server failed: {exc}")
    if still:
        state = (
            f"the server is still ending it ({engine} rolls its rows back; a `db seed` or "
            "`db reset` now waits for that)"
        )
    else:
        state = f"table test holds {held:,} of {rows:,} rows"
    return SeedInterrupted(
        f"interrupted: the insert was stopped on the server (KILL QUERY); {state}, marked "
        "unfinished: `stackrace db seed` makes it again, `stackrace db reset` drops it"
    )


def _running(conn: pymysql.connections.Connection, thread: int) -> bool:
    """Whether the server still runs (or rolls back: COMMAND 'Killed') a statement on
    connection `thread`."""
    found = query(
        conn,
        "SELECT COMMAND, INFO FROM information_schema.PROCESSLIST WHERE ID = %s",
        (thread,),
    )
    return bool(found) and found[0][0] != "Sleep" and found[0][1] is not None


def drop_seed(conn: pymysql.connections.Connection) -> bool:
    """Drop the tables a seed made (test, seed_meta); True when there was anything to drop."""
    state = seed_state(conn)
    _refuse_foreign_table(conn, state)
    had = state is not None or _table_exists(conn, "test")
    query(conn, "DROP TABLE IF EXISTS test, seed_meta")
    return had


def _matches(
    conn: pymysql.connections.Connection, state: SeedState, rows: int, eng: Engine
) -> bool:
    if state.rows != rows or state.engine != eng:
        return False
    found = query(
        conn,
        "SELECT ENGINE FROM information_schema.TABLES "
        "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'test'",
    )
    return bool(found) and str(found[0][0]).lower() == eng


def _refuse_foreign_table(conn: pymysql.connections.Connection, state: SeedState | None) -> None:
    """A `test` table without our seed_meta belongs to someone else: never drop it."""
    if state is None and _table_exists(conn, "test") and not _table_exists(conn, "seed_meta"):
        db = query(conn, "SELECT DATABASE()")[0][0]
        raise DbError(
            f"database {db!r} already has a table `test` that stackrace did not create; "
            "refusing to replace it (use another database)"
        )


def _table_exists(conn: pymysql.connections.Connection, name: str) -> bool:
    return bool(
        query(
            conn,
            "SELECT 1 FROM information_schema.TABLES "
            "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s",
            (name,),
        )
    )


def _create_meta(conn: pymysql.connections.Connection) -> None:
    query(
        conn,
        "CREATE TABLE IF NOT EXISTS seed_meta ("
        " id TINYINT NOT NULL PRIMARY KEY,"
        " `rows` INT NOT NULL, engine VARCHAR(16) NOT NULL, seed BIGINT NOT NULL,"
        " done TINYINT NOT NULL, started_at DATETIME(6) NOT NULL, seconds DOUBLE NULL"
        ") ENGINE=InnoDB",  # InnoDB: the done flag itself must survive a crash
    )


def _has_sequence_engine(conn: pymysql.connections.Connection) -> bool:
    import pymysql  # lazy: loaded by then (the connection is one): see admin.connect

    try:
        with conn.cursor() as cur:
            cur.execute("SELECT seq FROM seq_1_to_1")
            cur.fetchall()
        return True
    except pymysql.MySQLError:
        return False


def _fill(conn: pymysql.connections.Connection, rows: int, random_seed: int) -> str:
    import pymysql  # lazy: loaded by then (the connection is one): see admin.connect

    if _has_sequence_engine(conn):
        # RAND(N) with a constant seed: the same values on every machine and run
        query(
            conn,
            f"INSERT INTO test (id, value) SELECT seq, RAND({int(random_seed)}) "
            f"FROM seq_1_to_{int(rows)}",
        )
        return "sequence"
    rnd = random.Random(random_seed).random
    with conn.cursor() as cur:
        for start in range(1, rows + 1, _FALLBACK_BATCH):
            stop = min(start + _FALLBACK_BATCH, rows + 1)
            # executemany folds these into one multi-row INSERT per batch
            try:
                cur.executemany(
                    "INSERT INTO test (id, value) VALUES (%s, %s)",
                    [(i, rnd()) for i in range(start, stop)],
                )
            except pymysql.MySQLError as exc:
                raise DbError(f"seed failed while inserting rows: {exc.args[-1]}") from None
    return "insert"


__all__ = [
    "DEFAULT_ROWS",
    "ENGINES",
    "Engine",
    "SeedResult",
    "SeedState",
    "drop_seed",
    "estimate_bytes",
    "normalize_engine",
    "seed",
    "seed_state",
]


class SeededDatabase:
    """What every database of ours does the same way: seed table `test` and read its
    seed over the database's own connection. A database says where its data lies
    (`_free_space`, so a seed too big for the disk is refused) and whether it must be
    running first (`_require_running`); db/external.py and db/managed.py are the two."""

    def connection(self) -> pymysql.connections.Connection:
        raise NotImplementedError

    def _require_running(self) -> None:
        """Nothing to check by default: a server we did not start is up or unreachable."""

    def _free_space(self, conn: pymysql.connections.Connection) -> tuple[str, int] | None:
        """(data directory, bytes free there), or None when it is not ours to measure."""
        return None

    def seed(
        self,
        rows: int = DEFAULT_ROWS,
        engine: str = "myisam",
        *,
        force: bool = False,
        random_seed: int = DEFAULT_SEED,
    ) -> SeedResult:
        """Fill table `test` (skipped when a completed seed with these parameters exists);
        refused when its data directory lacks the space, stopped on the server on Ctrl-C."""
        self._require_running()
        with closing(self.connection()) as conn:
            return seed(
                conn,
                rows,
                engine,
                force=force,
                random_seed=random_seed,
                connect=self.connection,
                free_bytes=self._free_space(conn),
            )

    def seed_state(self) -> SeedState | None:
        self._require_running()
        with self.connection() as conn:
            return seed_state(conn)
