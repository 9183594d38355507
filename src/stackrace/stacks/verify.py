"""`stackrace verify`: every endpoint of a running stack against the contract."""

from __future__ import annotations

import json
import ssl
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stackrace.db.admin import query
from stackrace.db.counters import check_query_count, read_counters, sum_is_plausible, work_between
from stackrace.settings.workloads import HELLO, JSON_BODY
from stackrace.stacks import probe
from stackrace.stacks.placeholders import HOST

if TYPE_CHECKING:
    from pymysql.connections import Connection

IO_MS = 100


@dataclass
class Check:
    endpoint: str
    ok: bool
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    # facts verify measured on the way, e.g. {"db_persistent": "on"}: see check_facts
    measured: dict[str, str] = field(default_factory=dict)


def _framing(r: probe.ProbeResponse) -> list[str]:
    if r.chunked:
        return []
    if r.content_length is None:
        return ["neither Content-Length nor chunked framing"]
    if r.content_length != len(r.body):
        return [f"Content-Length {r.content_length} but {len(r.body)} body bytes"]
    return []


def _common(r: probe.ProbeResponse, ctype: str) -> list[str]:
    problems = []
    if r.status != 200:
        problems.append(f"status {r.status}")
    if not r.content_type.lower().startswith(ctype):
        problems.append(f"Content-Type {r.content_type or '(none)'!r}, expected {ctype}")
    return problems + _framing(r)


async def check_endpoint(port: int, endpoint: str, tls: ssl.SSLContext | None = None) -> Check:
    path = {"io": f"/io?ms={IO_MS}"}.get(endpoint, f"/{endpoint}")
    try:
        r = await probe.get(HOST, port, path, timeout=10.0, tls=tls)
    except (OSError, TimeoutError, ValueError) as exc:
        return Check(endpoint, False, [f"GET {path}: {exc or type(exc).__name__}"])
    if endpoint == "hello":
        problems = _common(r, "text/plain")
        if r.body != HELLO.encode():
            problems.append(f"body {r.body[:60]!r}, expected {HELLO!r}")
    elif endpoint == "json":
        problems = _common(r, "application/json")
        try:
            if json.loads(r.body) != json.loads(JSON_BODY):
                problems.append(f"body {r.body[:60]!r} is not {JSON_BODY}")
        except (ValueError, RecursionError):  # a server's body nested 100,000 deep
            problems.append(f"body {r.body[:60]!r} is not JSON")
    elif endpoint == "io":
        problems = _common(r, "text/plain")
        if r.body != b"ok":
            problems.append(f"body {r.body[:60]!r}, expected 'ok'")
        # 5 % below: an event loop's timer may fire a fraction of a ms early (uvloop
        # rounds to whole ms), and 99.7 ms read "answered in 100 ms: it did not wait"
        if r.seconds < 0.95 * IO_MS / 1000:
            problems.append(
                f"/io?ms={IO_MS} answered in {r.seconds * 1000:.0f} ms: it did not wait"
            )
    else:
        raise ValueError(f"unknown endpoint {endpoint}")
    return Check(endpoint, not problems, problems, r.seconds)


async def verify_port(
    port: int,
    endpoints: tuple[str, ...] = ("hello", "json", "io"),
    tls: ssl.SSLContext | None = None,
) -> list[Check]:
    return [await check_endpoint(port, e, tls) for e in endpoints]


# /db?queries=… as sent, and the number of queries the contract says it means: a missing
# or non-numeric value is 1, and values are clamped to 1..500 (TechEmpower's rule).
DB_CASES: tuple[tuple[str, int], ...] = (
    ("10", 10),
    ("1", 1),
    ("", 1),
    ("abc", 1),
    ("0", 1),
    ("1000", 500),
    ("20", 20),
)


async def check_db(
    port: int, db_conn: Connection, holders: int = 1, tls: ssl.SSLContext | None = None
) -> Check:
    """/db answers plausible sums, and the database really ran every query it owes; and
    whether the stack keeps its connections (`measured["db_persistent"]`, see
    `measure_persistence`; `holders` is how many workers or threads may each hold one)."""

    problems: list[str] = []
    # a first request opens the app's persistent connection, whose set-up may run SELECTs
    # of its own; it is not counted
    try:
        await probe.get(HOST, port, "/db?queries=1", timeout=10.0, tls=tls)
    except (OSError, TimeoutError, ValueError) as exc:
        return Check("db", False, [f"GET /db: {exc or type(exc).__name__}"])
    before = read_counters(db_conn)
    owed = 0
    t = 0.0
    for raw, n in DB_CASES:
        path = f"/db?queries={raw}" if raw else "/db"
        try:
            r = await probe.get(HOST, port, path, timeout=10.0, tls=tls)
        except (OSError, TimeoutError, ValueError) as exc:
            problems.append(f"GET {path}: {exc or type(exc).__name__}")
            continue
        t += r.seconds
        problems += [f"{path}: {p}" for p in _common(r, "text/plain")]
        try:
            total = float(r.body)
        except ValueError:
            problems.append(f"{path}: body {r.body[:40]!r} is not a number")
            continue
        if not sum_is_plausible(total, n):
            problems.append(f"{path}: sum {total} is not plausible for {n} queries")
        if b"." not in r.body or len(r.body.split(b".")[1]) != 6:
            problems.append(f"{path}: {r.body!r} is not printed with six decimals")
        owed += n
    after = read_counters(db_conn)
    work = work_between(before, after)
    counted = check_query_count(work, 1, owed, slack=2)
    if counted:
        problems.append(counted)
    measured: dict[str, str] = {}
    if not problems:
        measured["db_persistent"] = await measure_persistence(port, db_conn, holders, tls)
    return Check("db", not problems, problems, t, measured)


# facts check_db measures (the database's own counters): without a database, not checked
MEASURED_WITH_DB = ("db_persistent",)


async def measure_persistence(
    port: int, db_conn: Connection, holders: int, tls: ssl.SSLContext | None = None
) -> str:
    """Send more sequential /db requests than the stack has connection holders (workers ×
    threads), and count the connections the database saw opened: a stack that keeps them
    opens at most one per holder (the first request a worker serves), one that connects per
    request opens one for every request. The database's own counter, not the app's word."""

    requests = holders + 6
    before = read_counters(db_conn)
    for _ in range(requests):
        try:
            await probe.get(HOST, port, "/db?queries=1", timeout=10.0, tls=tls)
        except (OSError, TimeoutError, ValueError) as exc:
            return f"not measured (GET /db: {exc or type(exc).__name__})"
    opened = work_between(before, read_counters(db_conn)).connections
    return persistence(opened, requests, holders)


def persistence(new_connections: int, requests: int, holders: int = 1) -> str:
    """ "on" when `requests` sequential requests opened at most one connection per holder
    (they reused what was open), "off" when each opened one, else a description."""
    if new_connections >= requests:
        return "off"
    if new_connections <= holders:
        return "on"
    return f"{new_connections} new connections for {requests} requests"


DBJSON_REQUESTS = 5


async def check_dbjson(port: int, db_conn: Connection, tls: ssl.SSLContext | None = None) -> Check:
    """/dbjson answers a JSON object {"id", "value"} for one row, that row's real value (as
    the database has it), and the database ran exactly one SELECT per request."""

    problems: list[str] = []
    try:  # the first request may open the connection (and run set-up SELECTs): not counted
        await probe.get(HOST, port, "/dbjson", timeout=10.0, tls=tls)
    except (OSError, TimeoutError, ValueError) as exc:
        return Check("dbjson", False, [f"GET /dbjson: {exc or type(exc).__name__}"])
    before = read_counters(db_conn)
    rows: list[tuple[int, float]] = []
    t = 0.0
    for _ in range(DBJSON_REQUESTS):
        try:
            r = await probe.get(HOST, port, "/dbjson", timeout=10.0, tls=tls)
        except (OSError, TimeoutError, ValueError) as exc:
            problems.append(f"GET /dbjson: {exc or type(exc).__name__}")
            continue
        t += r.seconds
        problems += [f"/dbjson: {p}" for p in _common(r, "application/json")]
        row, why = _row(r.body)
        if row is None:
            problems.append(f"/dbjson: {why}")
        else:
            rows.append(row)
    after = read_counters(db_conn)
    counted = check_query_count(work_between(before, after), DBJSON_REQUESTS, 1, slack=2)
    if counted:
        problems.append(f"/dbjson: {counted}")
    for row_id, value in rows:  # read after the counters, so these SELECTs are not counted
        found = query(db_conn, "SELECT value FROM test WHERE id = %s", (row_id,))
        if not found:
            problems.append(f"/dbjson: id {row_id} is not a row of the table")
        elif abs(float(found[0][0]) - value) > 1e-9:
            problems.append(f"/dbjson: id {row_id} has value {found[0][0]}, answered {value}")
    return Check("dbjson", not problems, problems, t)


def _row(body: bytes) -> tuple[tuple[int, float] | None, str]:
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):  # a server's body nested 100,000 deep
        return None, f"body {body[:60]!r} is not JSON"
    if not isinstance(doc, dict) or set(doc) != {"id", "value"}:
        return None, f"body {body[:60]!r} is not an object with exactly id and value"
    row_id, value = doc["id"], doc["value"]
    if not isinstance(row_id, int) or isinstance(row_id, bool):
        return None, f"id {row_id!r} is not an integer"
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None, f"value {value!r} is not a number"
    return (row_id, float(value)), ""


async def check_facts(
    port: int,
    path: str | None,
    expect: dict[str, str],
    measured: dict[str, str],
    tls: ssl.SSLContext | None = None,
) -> Check:
    """What the stack's `expect` says must be true of it: each key is either measured by
    verify itself (`measured`, e.g. db_persistent from the database's Connections counter)
    or read from the JSON object the app answers on `path` (e.g. PHP's opcache as
    opcache_get_status() sees it). A key measured by neither is a problem."""
    problems: list[str] = []
    reported: dict[str, object] = {}
    t = 0.0
    if path is not None and any(k not in measured for k in expect):
        try:
            r = await probe.get(HOST, port, path, timeout=10.0, tls=tls)
            t = r.seconds
            if r.status != 200:
                problems.append(f"GET {path}: status {r.status}")
            else:
                doc = json.loads(r.body)
                reported = doc if isinstance(doc, dict) else {}
        except RecursionError:  # a server's body nested 100,000 deep
            problems.append(f"GET {path}: not JSON stackrace reads (nested too deep)")
        except (OSError, TimeoutError, ValueError) as exc:
            problems.append(f"GET {path}: {exc or type(exc).__name__}")
    for key, want in expect.items():
        if key in measured:
            got, source = measured[key], "measured"
        elif key in reported:
            got, source = str(reported[key]), path or ""  # (reported: path was read)
        else:
            if not problems:
                problems.append(f"{key}: neither measured here nor reported on {path}")
            continue
        if got != want:
            problems.append(f"{key} is {got!r} ({source}), expected {want!r}")
    return Check("facts", not problems, problems, t)
