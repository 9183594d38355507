"""One look at a database, managed or external (`DbStatus`): its state, how apps reach
it, what the server reports, its seed, and what the user should know. What `stackrace db
status` prints and `--json` writes; each kind of database fills it (stackrace.db.managed,
stackrace.db.external).
"""

from __future__ import annotations

import os
import pwd
from typing import Literal

import msgspec

from stackrace.db import admin
from stackrace.db import seed as seeding
from stackrace.db.settings import DbSettings

State = Literal["running", "stopped", "not installed", "unreachable"]


class DbStatus(msgspec.Struct, kw_only=True):
    """One look at a database: managed or external, and what the server reports."""

    kind: Literal["managed", "external"]
    state: State
    settings: DbSettings | None = None
    dir: str | None = None
    pid: int | None = None
    log_file: str | None = None
    facts: admin.ServerFacts | None = None
    seed: seeding.SeedState | None = None
    error: str | None = None
    run_as: str | None = None  # the OS account mariadbd runs as (managed only)
    secure_file_priv: str | None = None  # the only directory it reads or writes files in
    notes: list[str] = msgspec.field(default_factory=list)  # things the user should know


def whoami() -> str:
    """This process's account, by name (its uid where it has none)."""

    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())
