"""Verifying database work: server query counters and the plausible sum of N queries.

A verifier reads the counters before and after a run and checks that the apps executed
requests × N SELECTs; it checks each response's sum against `plausible_sum_range`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import msgspec

from stackrace.db.admin import query

if TYPE_CHECKING:  # a hint: the driver is imported where a connection is made (admin.py)
    import pymysql


class QueryCounters(msgspec.Struct, frozen=True):
    """Global status counters: Com_select counts SELECTs, Questions every client statement,
    Connections every connection attempt (so a stack that connects per request shows)."""

    com_select: int
    questions: int
    connections: int = 0

    def __sub__(self, earlier: QueryCounters) -> QueryCounters:
        return QueryCounters(
            com_select=self.com_select - earlier.com_select,
            questions=self.questions - earlier.questions,
            connections=self.connections - earlier.connections,
        )


def read_counters(conn: pymysql.connections.Connection) -> QueryCounters:
    """Read Com_select, Questions and Connections (global, every connection's work).

    The SHOW statement is itself counted in Questions (not in Com_select); see `work_between`.
    So is every connection's set-up and its goodbye (COM_QUIT, measured on MariaDB 10.11),
    which the server may handle after the client has gone on: Com_select is the count to
    judge by.
    """
    values = {
        str(k).lower(): int(v)
        for k, v in query(
            conn,
            "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_select', 'Questions', 'Connections')",
        )
    }
    return QueryCounters(
        com_select=values["com_select"],
        questions=values["questions"],
        connections=values.get("connections", 0),
    )


def work_between(before: QueryCounters, after: QueryCounters) -> QueryCounters:
    """What other clients executed between two `read_counters` calls on one connection.

    Questions is corrected by the one SHOW statement of the second read.
    """
    delta = after - before
    return QueryCounters(
        com_select=delta.com_select, questions=delta.questions - 1, connections=delta.connections
    )


def check_query_count(
    delta: QueryCounters, requests: int, queries_per_request: int, slack: int = 0
) -> str | None:
    """None when the apps ran at least requests × N SELECTs (and at most `slack` more);
    otherwise a one-line explanation. `slack` absorbs SELECTs that drivers issue on their
    own when they connect (e.g. `SELECT @@max_allowed_packet`): allow one or two per
    connection."""
    expected = requests * queries_per_request
    if delta.com_select < expected:
        return f"the database ran {delta.com_select} SELECTs, expected at least {expected}"
    if delta.com_select > expected + slack:
        return (
            f"the database ran {delta.com_select} SELECTs, expected {expected} "
            f"(+{slack} allowed for connection set-up)"
        )
    return None


def plausible_sum_range(
    queries: int, rows_per_query: int = 10, sigmas: float = 6.0
) -> tuple[float, float]:
    """The range a response's sum falls in: N queries of `rows_per_query` uniform [0,1) values.

    The sum of k = N·rows uniform values has mean k/2 and standard deviation sqrt(k/12);
    mean ± 6σ is wrong by chance about twice in a billion responses. Clipped to [0, k].
    """
    if queries < 0 or rows_per_query < 0:
        raise ValueError("queries and rows_per_query must not be negative")
    k = queries * rows_per_query
    half = sigmas * math.sqrt(k / 12.0)
    return max(0.0, k / 2.0 - half), min(float(k), k / 2.0 + half)


def sum_is_plausible(total: float, queries: int, rows_per_query: int = 10) -> bool:
    lo, hi = plausible_sum_range(queries, rows_per_query)
    return math.isfinite(total) and lo <= total <= hi
