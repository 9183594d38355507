"""The database every app is given by stackrace (docs/db.md), read from the environment.

Shared by the PyMySQL (db_sync) and aiomysql (db_async) code. Kept Python 3.9-compatible
for the PyPy stack.
"""

from __future__ import annotations

import os
import random
import sys
from typing import Any

# ids in `test` are 1..ROWS; a range of 10 must fit, so starts are 1..ROWS-9
_ROWS = int(os.environ.get("STACKRACE_DB_ROWS") or 1_000_000)
MAX_START = max(1, _ROWS - 9)
# connections per process for the stacks whose model calls for a pool (greenlets, asyncio);
# stacks.toml sets it from the `db_pool` param, so a variant can change it
POOL_SIZE = max(1, int(os.environ.get("STACKRACE_DB_POOL") or 16))


def random_start() -> int:
    return random.randint(1, MAX_START)


def random_id() -> int:
    """A row for /dbjson: any id of the table."""
    return random.randint(1, _ROWS)


def connect_args() -> dict[str, Any]:
    """Keyword arguments for PyMySQL (aiomysql calls `database` `db`). Read at the first
    connect, so a stack starts (and serves /hello) without any database settings at all."""
    env = os.environ
    return {
        # TCP on loopback, as docs/db.md asks, even when a socket is offered
        "host": env.get("STACKRACE_DB_HOST", "127.0.0.1"),
        "port": int(env.get("STACKRACE_DB_PORT") or 3306),
        "user": env.get("STACKRACE_DB_USER", "stackrace"),
        "password": env.get("STACKRACE_DB_PASSWORD", ""),
        "database": env.get("STACKRACE_DB_NAME", "stackrace"),
        "autocommit": True,  # read-only work: no transaction to keep open
        "connect_timeout": 5,
    }


_last_error = ""


def log_error(exc: BaseException) -> None:
    """One line per new kind of failure: a stopped database under load would otherwise
    write thousands of identical lines into the stack's log."""
    global _last_error
    text = f"/db: {type(exc).__name__}: {exc}"
    if text != _last_error:
        _last_error = text
        print(text, file=sys.stderr, flush=True)
