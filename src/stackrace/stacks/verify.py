"""`stackrace verify`: every endpoint of a running stack against the contract."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from stackrace.config import HOST
from stackrace.stacks import probe
from stackrace.workloads import HELLO, JSON_BODY

IO_MS = 100


@dataclass
class Check:
    endpoint: str
    ok: bool
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0


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


async def check_endpoint(port: int, endpoint: str) -> Check:
    path = {"io": f"/io?ms={IO_MS}"}.get(endpoint, f"/{endpoint}")
    try:
        r = await probe.get(HOST, port, path, timeout=10.0)
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
        except ValueError:
            problems.append(f"body {r.body[:60]!r} is not JSON")
    elif endpoint == "io":
        problems = _common(r, "text/plain")
        if r.body != b"ok":
            problems.append(f"body {r.body[:60]!r}, expected 'ok'")
        if r.seconds < IO_MS / 1000:
            problems.append(
                f"/io?ms={IO_MS} answered in {r.seconds * 1000:.0f} ms: it did not wait"
            )
    else:
        raise ValueError(f"unknown endpoint {endpoint}")
    return Check(endpoint, not problems, problems, r.seconds)


async def verify_port(
    port: int, endpoints: tuple[str, ...] = ("hello", "json", "io")
) -> list[Check]:
    return [await check_endpoint(port, e) for e in endpoints]


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


async def check_db(port: int, db_conn: object) -> Check:
    """/db answers plausible sums, and the database really ran every query it owes."""
    from stackrace.db.counters import (
        check_query_count,
        read_counters,
        sum_is_plausible,
        work_between,
    )

    problems: list[str] = []
    # a first request opens the app's persistent connection, whose set-up may run SELECTs
    # of its own; it is not counted
    try:
        await probe.get(HOST, port, "/db?queries=1", timeout=10.0)
    except (OSError, TimeoutError, ValueError) as exc:
        return Check("db", False, [f"GET /db: {exc or type(exc).__name__}"])
    before = read_counters(db_conn)  # type: ignore[arg-type]
    owed = 0
    t = 0.0
    for raw, n in DB_CASES:
        path = f"/db?queries={raw}" if raw else "/db"
        try:
            r = await probe.get(HOST, port, path, timeout=10.0)
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
    after = read_counters(db_conn)  # type: ignore[arg-type]
    counted = check_query_count(work_between(before, after), 1, owed, slack=2)
    if counted:
        problems.append(counted)
    return Check("db", not problems, problems, t)
