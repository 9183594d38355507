"""What every Python app answers, in one place (see docs/stacks.md for the contract).

Kept Python 3.9-compatible: the PyPy stack imports it too (Debian's PyPy is 3.9).
"""

from __future__ import annotations

import json

HELLO = b"Hello, World!"
MESSAGE = "Hello, World!"
OK = b"ok"
NOT_FOUND = b"not found"
TEXT = "text/plain"
JSON = "application/json"

IO_DEFAULT_MS = 10
IO_MAX_MS = 10_000  # a typo in a URL must not park a worker for hours

# /db?queries=N: a missing or non-numeric N is 1, and N is clamped to 1..500
# (TechEmpower's multiple-queries rule)
DB_QUERIES_MAX = 500
DB_QUERY = "SELECT value FROM test WHERE id >= %s LIMIT 10"
DB_UNAVAILABLE = b"database unavailable"
# /dbjson: one row by id, answered as a JSON object (TechEmpower's single-query test)
DB_ROW_QUERY = "SELECT id, value FROM test WHERE id = %s"


def json_body() -> bytes:
    """Serialised per request, as a real handler would; json.dumps' default separators
    give exactly the contract's bytes: {"message": "Hello, World!"}."""
    return json.dumps({"message": MESSAGE}).encode()


def io_ms(query: str | None) -> int:
    """The `ms` of a query string like `ms=100`; the default when missing or not a number."""
    if query:
        for part in query.split("&"):
            key, _, value = part.partition("=")
            if key == "ms":
                return parse_ms(value)
    return IO_DEFAULT_MS


def parse_ms(value: str | None) -> int:
    if value is None or not value.isdigit():
        return IO_DEFAULT_MS
    return min(int(value), IO_MAX_MS)


def db_queries(query: str | None) -> int:
    """The `queries` of a query string like `queries=10`, by the contract's rule."""
    if query:
        for part in query.split("&"):
            key, _, value = part.partition("=")
            if key == "queries":
                return parse_queries(value)
    return 1


def parse_queries(value: str | None) -> int:
    # isascii: str.isdigit() also accepts digits like "²" that int() refuses
    if value is None or not (value.isascii() and value.isdigit()):
        return 1
    return max(1, min(int(value), DB_QUERIES_MAX))


def db_body(total: float) -> bytes:
    """The sum of the values, printed with six decimals like every other stack."""
    return b"%.6f" % total


def row_body(row_id: int, value: float) -> bytes:
    """/dbjson's answer: the row as a JSON object, serialised per request."""
    return json.dumps({"id": row_id, "value": value}).encode()
