"""db/seed.py: a seed is refused before anything is written when the server's disk
lacks the space it needs (the estimate per row is measured: see the module docstring)."""

from __future__ import annotations

import pytest

from stackrace.db import DbError
from stackrace.db import seed as seeding


def test_the_estimate_grows_with_rows_and_engine() -> None:
    small = seeding.estimate_bytes(1_000_000, "myisam")
    assert small < seeding.estimate_bytes(1_000_000, "innodb")
    assert seeding.estimate_bytes(2_000_000, "myisam") - small == 1_000_000 * 28
    # the largest seed there is: tens of gigabytes
    assert seeding.estimate_bytes(2**31 - 1, "innodb") > 150e9


def test_a_seed_bigger_than_the_free_space_is_refused_before_any_statement() -> None:
    # refused before the connection is touched: no server needed to say no
    with pytest.raises(DbError, match=r"--rows 2,147,483,647 needs about .* GB in /data"):
        seeding.seed(
            None,  # type: ignore[arg-type]  # no connection: refused before one is used
            2**31 - 1,
            "innodb",
            free_bytes=("/data", 70 * 10**9),
        )
