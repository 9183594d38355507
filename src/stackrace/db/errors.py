"""The one error type of the database layer: a clear, one-line message for the user."""

from __future__ import annotations

from stackrace.base.errors import WithLogTail


class DbError(WithLogTail, RuntimeError):
    """Anything that keeps the database from being usable, said in one line.

    `log_tail` holds the last lines of mariadbd's error log when the server failed to
    start, so a caller can show them under the message.
    """

    tail_heading = "mariadbd log (last lines)"


class SeedInterrupted(DbError):
    """Ctrl-C during a seed: the statement was stopped on the server too, and the message
    says in what state it left table `test` (the command exits 130 with it)."""

    exit_code = 130
