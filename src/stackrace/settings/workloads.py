"""The endpoints every app serves, and how each response is verified.

    GET /hello        "Hello, World!"                    text/plain
    GET /json         {"message": "Hello, World!"}        application/json
    GET /io?ms=N      waits N ms the stack's way, "ok"    text/plain
    GET /db?queries=N N range queries summed, "%.6f"     text/plain  (the database workload)
    GET /dbjson       one row as {"id": N, "value": V}    application/json  (optional)

The engine checks bodies with a `BodyCheck`; `stackrace verify` checks the full contract
(status, Content-Type, framing, exact body, that /io really waits).

An *optional* workload is served only by the stacks whose block lists it in `workloads`
(`Stack.serves`): /dbjson, TechEmpower's single-query test on this project's table, which
experiment 003 timed (a query plus JSON serialisation). The engine only checks that its
body names a value (serialisers differ in spacing); verify checks the row against the
database.
"""

from __future__ import annotations

from dataclasses import dataclass

from stackrace.engine.model import BodyCheck

HELLO = "Hello, World!"
JSON_BODY = '{"message": "Hello, World!"}'


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    content_type: str
    needs_db: bool = False
    optional: bool = False  # served only by stacks that list it (config: `workloads`)

    def path(self, io_ms: int = 10, queries: int = 10) -> str:
        if self.name == "io":
            return f"/io?ms={io_ms}"
        if self.name == "db":
            return f"/db?queries={queries}"
        return f"/{self.name}"

    def check(self, queries: int = 10) -> BodyCheck:
        if self.name == "hello":
            return BodyCheck(kind="exact", arg=HELLO)
        if self.name == "io":
            return BodyCheck(kind="exact", arg="ok")
        if self.name == "db":
            lo, hi = db_sum_range(queries)
            return BodyCheck(kind="float_range", lo=lo, hi=hi)
        if self.name == "dbjson":
            return BodyCheck(kind="contains", arg='"value"')
        return BodyCheck(kind="json", arg=JSON_BODY)


WORKLOADS: dict[str, Workload] = {
    "hello": Workload("hello", "hello world", "text/plain"),
    "json": Workload("json", "JSON", "application/json"),
    "io": Workload("io", "backend wait (/io)", "text/plain"),
    "db": Workload("db", "MySQL range queries (/db)", "text/plain", needs_db=True),
    "dbjson": Workload(
        "dbjson", "one row as JSON (/dbjson)", "application/json", needs_db=True, optional=True
    ),
}


def clamp_queries(n: int) -> int:
    """Queries per request are clamped to 1..500, as TechEmpower's multiple-queries test."""
    return max(1, min(500, n))


def db_sum_range(queries: int) -> tuple[float, float]:
    """Plausible range of the sum of `queries` × 10 uniform [0, 1) values (see stackrace.db)."""
    # db/counters imports pymysql; only the db workload's check sums
    from stackrace.db.counters import plausible_sum_range  # lazy: keeps load's start-up fast

    return plausible_sum_range(clamp_queries(queries))
