"""Watching the database a run uses, so a dead database is named, not blamed on a stack.

    async with DbWatch(settings) as watch:         # managed or external: any DbSettings
        ...                                        # the load runs
        watch.state                                # "up" | "down" | "restarted" |
                                                   # "damaged" | "unknown"
        watch.faulty                               # down or damaged: start nothing on it
        watch.since                                # time.monotonic() of that state's start
        watch.down_during(level_start, level_end)  # DownInterval list: mark the level
        watch.describe()                           # "database down for 3.2 s: refused ..."

About twice a second (`interval`) it asks the server for its `Uptime` on one kept
connection, as the apps' user, over TCP as the apps connect (or the socket). The
blocking client (PyMySQL) runs in a thread of the watch's own, so the event loop never
waits and a stuck poll cannot pile up behind others (the next poll starts only when the
last is done, as dolphie's workers do). Each poll is bounded by `timeout`.

What the states mean:
- "up": the server answered. An error *from the server* (too many connections, access
  denied) still counts as up — the process is alive — and is kept in `last_error`;
- "down": no answer: refused, reset, lost, or silent for `timeout`;
- "restarted": answering again, but it is another server process than before: its
  `Uptime` says it started after the one we saw, or its connection ids started again
  (our connection was lost and the new one has a lower id). Sticky until the next down.
- "damaged": the server answers, but the table the workload reads (`test`) is gone:
  dropped by `stackrace db reset`, by a seed being redone, by hand. Every /db request
  then fails, and that is the database's doing, not the stack's. Until the table is back.
A restart between two polls is caught too (the kept connection is lost, the reconnect
finds the new server) and recorded as an interval although no poll saw it down; so is a
table dropped and made again between two polls (its creation time changed).

The table is followed with `SHOW TABLE STATUS LIKE 'test'` on the same connection: it
says whether the table exists and when it was made, without reading it (it counts in
`Questions`, not `Com_select`). Only a table seen at the first poll is followed: a
database that never had one (an external server used for something else) is never
called damaged.

An interval covers the whole time the database may have been down: from the last poll
that saw it up (or the start of the watch) to the first poll that saw it answer again.

Each poll runs one `SHOW GLOBAL STATUS`: it adds to the server's `Questions`, not to
`Com_select`, so the query-count check of `stackrace verify` is not disturbed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from stackrace.db.settings import DbSettings

if TYPE_CHECKING:  # a hint: the driver is imported where it is used (admin.connect)
    import pymysql

DbState = Literal["unknown", "up", "down", "restarted", "damaged"]

TABLE = "test"  # the table the db workload reads (stackrace.db.seed)

# client-side error codes of PyMySQL / libmysql (2000-2999): no answer from a server.
# Below 2000 the server itself answered with an error: it is alive.
_CLIENT_ERRORS = range(2000, 3000)


@dataclass(frozen=True)
class DownInterval:
    """A time the database may have been down, in time.monotonic() seconds."""

    start: float  # the last poll that saw it up (or when the watch began)
    end: float | None  # the first poll that saw it answer again; None while still down
    cause: str  # "refused", "no answer within 1.0 s", "restarted between two polls", …
    restarted: bool = False  # the server that came back is another process
    damaged: bool = False  # the server answered, but the workload's table was gone

    @property
    def kind(self) -> str:
        """What the interval was, in a word for a report: down, restarted or damaged."""
        return "damaged" if self.damaged else "restarted" if self.restarted else "down"

    def overlaps(self, t0: float, t1: float, now: float | None = None) -> bool:
        """Whether this interval shares any time with [t0, t1]."""
        end = self.end if self.end is not None else (time.monotonic() if now is None else now)
        return self.start <= t1 and end >= t0


@dataclass(frozen=True)
class _Answer:
    """One poll's result, made in the watch's thread and applied in the loop's."""

    at: float
    ok: bool
    error: str = ""
    server_error: bool = False  # the server answered, with an error
    # when the server started, in our clock: somewhere in (started_lo, started_hi]
    started_lo: float | None = None
    started_hi: float | None = None
    connection_id: int | None = None
    reconnected: bool = False  # the kept connection had to be (re)made in this poll
    # the workload's table: None when not asked (no database named, or the question
    # failed), else its creation time as the server says it ("" when the table is gone)
    table: str | None = None


class DbWatch:
    """Polls one database; see the module docstring for what the states mean."""

    def __init__(
        self,
        settings: DbSettings,
        *,
        interval: float = 0.5,
        timeout: float = 1.0,
        via_socket: bool = False,
        on_change: Callable[[DbWatch], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval <= 0 or timeout <= 0:
            raise ValueError("interval and timeout must be above zero")
        self.settings = settings
        self.interval = interval
        self.timeout = timeout
        self.via_socket = via_socket and bool(settings.socket)
        self.on_change = on_change  # called in the loop's thread after each state change
        self.clock = clock
        self.last_error = ""
        self._state: DbState = "unknown"
        self._since = clock()
        self._last_up = clock()
        self._intervals: list[DownInterval] = []
        self._conn: pymysql.connections.Connection | None = None
        # what the polls so far say about when this server started (see _is_restart)
        self._started: tuple[float, float] | None = None
        self._connection_id: int | None = None
        # the workload table's creation time when first seen (None: not followed)
        self._table: str | None = None
        self._table_asked = False  # an answer has said whether the table is there
        self._executor: ThreadPoolExecutor | None = None
        self._task: asyncio.Task[None] | None = None

    # ---- what callers read ---------------------------------------------------------

    @property
    def state(self) -> DbState:
        return self._state

    @property
    def since(self) -> float:
        """When the current state began (time.monotonic())."""
        return self._since

    @property
    def intervals(self) -> list[DownInterval]:
        """Every down interval so far, oldest first (the last may still be open)."""
        return list(self._intervals)

    @property
    def restarts(self) -> int:
        return sum(i.restarted for i in self._intervals)

    @property
    def faulty(self) -> bool:
        """Down, or up without the workload's table: no stack should start on it now."""
        return self._state in ("down", "damaged")

    def down_during(self, t0: float, t1: float) -> list[DownInterval]:
        """The intervals that overlap [t0, t1]: a level measured then had no database."""
        now = self.clock()
        return [i for i in self._intervals if i.overlaps(t0, t1, now)]

    def describe(self) -> str:
        """One line for a status bar or a report."""
        ago = self.clock() - self._since
        if self._state == "down":
            return f"database down for {ago:.1f} s: {self.last_error}"
        if self._state == "restarted":
            return f"database restarted {ago:.1f} s ago ({self.restarts} restart(s) so far)"
        if self._state == "damaged":
            return f"database damaged for {ago:.1f} s: {self.last_error}"
        if self._state == "up":
            note = f" (it answers with an error: {self.last_error})" if self.last_error else ""
            return f"database up{note}"
        return "database not checked yet"

    # ---- running --------------------------------------------------------------------

    async def start(self) -> None:
        """Start polling; returns after the first poll, so `state` is known."""
        if self._task is not None:
            return
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="db-watch")
        await self.poll()
        self._task = asyncio.create_task(self._run(), name="db-watch")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        executor, self._executor = self._executor, None
        if executor is not None:
            await asyncio.get_running_loop().run_in_executor(executor, self._close)
            executor.shutdown(wait=False)

    async def __aenter__(self) -> DbWatch:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _run(self) -> None:
        while True:
            began = self.clock()
            await self.poll()
            # the next poll starts `interval` after this one began, never overlapping it
            await asyncio.sleep(max(0.0, self.interval - (self.clock() - began)))

    async def poll(self) -> DbState:
        """Poll once now and update the state (the loop does this every `interval`)."""
        loop = asyncio.get_running_loop()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="db-watch")
        answer = await loop.run_in_executor(self._executor, self._ask)
        self._apply(answer)
        return self._state

    # ---- the poll, in the watch's thread --------------------------------------------

    def _connect(self) -> pymysql.connections.Connection:
        # imported at the first poll, in the watch's thread: the app imports this module
        # with every race, most never watch a database, and it keeps start-up fast
        import pymysql  # lazy: only with a database

        s = self.settings
        return pymysql.connect(
            host=s.host,
            port=s.port,
            unix_socket=s.socket if self.via_socket else None,
            user=s.user,
            password=s.password,
            database=s.database or None,
            connect_timeout=self.timeout,
            read_timeout=self.timeout,
            write_timeout=self.timeout,
            ssl_disabled=True,  # else PyMySQL spends 30-50 ms building a TLS context
            autocommit=True,
        )

    def _uptime(self, conn: pymysql.connections.Connection) -> int:
        with conn.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS LIKE 'Uptime'")
            row = cur.fetchone()
        return int(row[1]) if row else 0

    def _table_created(self, conn: pymysql.connections.Connection) -> str | None:
        """The workload table's creation time ("" when it does not exist); None when the
        question cannot be asked (no database named) or the server refuses it."""
        if not self.settings.database:
            return None
        import pymysql  # lazy: loaded by then (the connection is one): see _connect

        try:
            with conn.cursor() as cur:
                cur.execute("SHOW TABLE STATUS LIKE %s", (TABLE,))
                row = cur.fetchone()
                names = [d[0].lower() for d in cur.description or ()]
        except pymysql.err.InternalError:
            return None
        except pymysql.err.OperationalError as exc:
            if exc.args and isinstance(exc.args[0], int) and exc.args[0] in _CLIENT_ERRORS:
                raise  # the connection, not the question: a down server
            return None  # the server says no (a privilege): not followed
        if row is None:
            return ""
        created = row[names.index("create_time")] if "create_time" in names else None
        return str(created) if created is not None else "?"

    def _ask(self) -> _Answer:
        import pymysql  # lazy: for its errors; loaded at the first connect: see _connect

        reconnected = False
        uptime: int | None = None
        try:
            if self._conn is not None:
                try:
                    asked = self.clock()
                    uptime = self._uptime(self._conn)
                except (pymysql.MySQLError, OSError) as exc:
                    self._close()
                    if "timed out" in str(exc):
                        raise  # silent for `timeout`: down now, not after a second wait
                    # lost (a restart, a kill): a new connection right away tells which
            if self._conn is None:
                self._conn = self._connect()
                reconnected = True
            if uptime is None:
                asked = self.clock()
                uptime = self._uptime(self._conn)
            table = self._table_created(self._conn)
            at = self.clock()
            # Uptime is whole seconds, read somewhere between `asked` and `at`
            return _Answer(
                at=at,
                ok=True,
                started_lo=asked - uptime - 1,
                started_hi=at - uptime,
                connection_id=self._conn.thread_id(),
                reconnected=reconnected,
                table=table,
            )
        except pymysql.MySQLError as exc:
            self._close()
            code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0
            server_said = bool(code) and code not in _CLIENT_ERRORS
            return _Answer(
                at=self.clock(), ok=False, error=_describe(exc), server_error=server_said
            )
        except (OSError, ValueError) as exc:
            self._close()
            return _Answer(at=self.clock(), ok=False, error=str(exc) or type(exc).__name__)

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    # ---- state changes, in the loop's thread ----------------------------------------

    def _apply(self, a: _Answer) -> None:
        before = self._state
        if not a.ok and not a.server_error:
            self.last_error = a.error
            if self._state == "damaged":  # worse now: the damage ends where the outage begins
                self._close_interval(a.at, restarted=False)
            if self._state != "down":
                self._set("down", a.at)
                self._intervals.append(DownInterval(self._last_up, None, a.error))
            return
        if a.server_error:  # alive, but says no: not a dead database
            self.last_error = a.error
            if self._state in ("unknown", "down"):
                self._close_interval(a.at, restarted=False)
                self._set("up", a.at)
            self._last_up = a.at
            return
        self.last_error = ""
        restarted = self._is_restart(a)
        self._narrow_start(a, restarted)
        if a.connection_id is not None:
            self._connection_id = a.connection_id
        if self._follow_table(a, before):
            return
        if before in ("down", "damaged"):  # answering again; or the table is back (a seed)
            self._close_interval(a.at, restarted)
            self._set("restarted" if restarted else "up", a.at)
        elif restarted:  # came back between two polls: no poll saw it down
            self._intervals.append(
                DownInterval(self._last_up, a.at, "restarted between two polls", restarted=True)
            )
            self._set("restarted", a.at)
        elif before == "unknown":
            self._set("up", a.at)
        self._last_up = a.at

    def _follow_table(self, a: _Answer, before: DbState) -> bool:
        """Compare the workload's table with what the first poll saw; True when this
        answer found it gone (the state is then "damaged", and nothing more to do)."""
        if a.table is None:
            return False
        if self._table is None:
            if not self._table_asked and a.table:  # there at the start: followed from now on
                self._table = a.table
            self._table_asked = True
            return False
        if not a.table:  # gone
            self.last_error = (
                f"table {TABLE} is gone (dropped: `stackrace db reset`, a seed redone, by hand)"
            )
            if before != "damaged":
                if before == "down":
                    self._close_interval(a.at, False)
                self._intervals.append(
                    DownInterval(self._last_up, None, self.last_error, damaged=True)
                )
                self._set("damaged", a.at)
            self._last_up = a.at
            return True
        if a.table != self._table:  # made again: dropped and re-seeded
            if before != "damaged":  # between two polls: no poll saw it gone
                self._intervals.append(
                    DownInterval(
                        self._last_up,
                        a.at,
                        f"table {TABLE} was dropped and made again between two polls",
                        damaged=True,
                    )
                )
            self._table = a.table
        return False

    def _is_restart(self, a: _Answer) -> bool:
        """Another server process than the one seen so far?

        Each answer bounds the server's start time; answers from one server all contain
        its true start, so an answer whose bounds lie wholly after what the earlier ones
        said comes from a server that started later. And connection ids grow for a
        server's whole life: a new connection that gets an id no higher than our last
        one (a restarted server counts from 1 again, often giving us the same id) is on
        another server.
        """
        if self._started is None or a.started_lo is None:
            return False  # nothing seen before to compare with
        if a.started_lo > self._started[1]:
            return True
        return (
            a.reconnected
            and a.connection_id is not None
            and self._connection_id is not None
            and a.connection_id <= self._connection_id
        )

    def _narrow_start(self, a: _Answer, restarted: bool) -> None:
        if a.started_lo is None or a.started_hi is None:
            return
        if self._started is None or restarted:
            self._started = (a.started_lo, a.started_hi)
        else:
            lo, hi = self._started
            self._started = (max(lo, a.started_lo), min(hi, a.started_hi))

    def _close_interval(self, at: float, restarted: bool) -> None:
        if self._intervals and self._intervals[-1].end is None:
            last = self._intervals[-1]
            self._intervals[-1] = DownInterval(
                last.start, at, last.cause, restarted or last.restarted, last.damaged
            )

    def _set(self, state: DbState, at: float) -> None:
        self._state, self._since = state, at
        if self.on_change is not None:
            self.on_change(self)


def _describe(exc: BaseException) -> str:
    args = exc.args
    if len(args) >= 2:
        text = str(args[1])
        if "timed out" in text:
            return f"no answer ({text})"
        if "Connection refused" in text:
            return "connection refused"
        return f"({args[0]}) {text}"
    return str(exc) or type(exc).__name__
