"""How long a fresh machine waits for its database: `stackrace db up` + seed, from nothing.

Each round uses a fresh temp data dir and a free port (mariadb-install-db, start, provision,
seed), then deletes it. Prints every round's split and the median of the totals.

    .venv/bin/python bench/db_seed.py                 # 1,000,000 MyISAM rows, 3 rounds
    .venv/bin/python bench/db_seed.py --engine innodb --rounds 5
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from stackrace.db import DbError, ManagedMariaDB


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_round(rows: int, engine: str) -> tuple[float, float, float]:
    """(up seconds, seed seconds, total seconds) on a fresh instance."""
    with tempfile.TemporaryDirectory(prefix="stackrace-dbbench-") as tmp:
        db = ManagedMariaDB(Path(tmp) / "mariadb", free_port(), scoped=True)
        try:
            t0 = time.perf_counter()
            db.up()
            t1 = time.perf_counter()
            result = db.seed(rows, engine)
            t2 = time.perf_counter()
            assert not result.skipped
        finally:
            db.reset(wipe=True)  # its server files may live outside tmp (docs/db.md)
    return t1 - t0, t2 - t1, t2 - t0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--engine", default="myisam", choices=("myisam", "innodb"))
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    totals = []
    try:
        for i in range(args.rounds):
            up, seed, total = one_round(args.rows, args.engine)
            totals.append(total)
            print(f"round {i + 1}: up {up:.2f} s + seed {seed:.2f} s = {total:.2f} s", flush=True)
    except DbError as exc:
        print(f"db_seed: {exc}", file=sys.stderr)
        return 1
    print(
        f"median up + seed of {args.rows:,} {args.engine} rows on a fresh data dir: "
        f"{statistics.median(totals):.2f} s (of {args.rounds})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
