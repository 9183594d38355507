"""The database a db workload needs: the managed MariaDB, started and seeded on demand."""

from __future__ import annotations

import argparse
import sys


def database_env(args: argparse.Namespace) -> dict[str, str] | None:
    """Environment variables that point every app at a ready, seeded database."""
    try:
        from stackrace.db import ManagedMariaDB, db_env  # type: ignore[attr-defined]
    except ImportError as exc:
        print(f"stackrace: the db workload needs the managed database: {exc}", file=sys.stderr)
        return None
    try:
        db = ManagedMariaDB()
        db.ensure_ready()
        return db_env(db.settings)
    except Exception as exc:  # DbError and whatever the server said
        print(f"stackrace: database: {exc}", file=sys.stderr)
        return None
