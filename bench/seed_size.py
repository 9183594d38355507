"""How much disk a seed takes on the server, per row and engine: the figures behind
db/seed.py's BYTES_PER_ROW (a seed larger than the free space is refused before it
starts).

A fresh private MariaDB (scoped: it stops with this script) is seeded with each engine in
turn; the data directory's blocks on disk are summed before and after each seed, and
the files that grew by more than 1 MiB are named (InnoDB's undo log grows ibdata1, and
ibdata1 does not shrink afterwards).

    .venv/bin/python bench/seed_size.py                     # 2,000,000 rows, both engines
    .venv/bin/python bench/seed_size.py --rows 5000000 --engine innodb
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from stackrace.db import ManagedMariaDB
from stackrace.db.seed import BYTES_PER_ROW, ENGINES


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def blocks(directory: Path) -> dict[str, int]:
    """Bytes on disk of every file under `directory`, by its relative path."""
    out = {}
    for dirpath, _dirs, files in os.walk(directory):
        for name in files:
            path = os.path.join(dirpath, name)
            try:
                out[os.path.relpath(path, directory)] = os.lstat(path).st_blocks * 512
            except OSError:
                continue
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--engine", choices=ENGINES, action="append")
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="stackrace-seed-size-"))
    db = ManagedMariaDB(root / "db", free_port(), scoped=True)
    try:
        db.up()
        datadir = db.paths.datadir
        for engine in args.engine or list(ENGINES):
            db.reset()  # each engine from the same empty table
            before = blocks(datadir)
            t0 = time.monotonic()
            db.seed(args.rows, engine, force=True)
            took = time.monotonic() - t0
            after = blocks(datadir)
            grown = sum(after.values()) - sum(before.values())
            print(
                f"{engine}: {args.rows:,} rows in {took:.1f} s, {grown / 1e6:,.1f} MB more on "
                f"disk: {grown / args.rows:.1f} bytes a row (db/seed.py counts "
                f"{BYTES_PER_ROW[engine]})"
            )
            for name in sorted(after):
                delta = after[name] - before.get(name, 0)
                if delta > 1 << 20:
                    print(f"  {name}: +{delta / 1e6:,.1f} MB")
    finally:
        db.reset(wipe=True)


if __name__ == "__main__":
    main()
