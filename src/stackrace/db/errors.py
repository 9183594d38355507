"""The one error type of the database layer: a clear, one-line message for the user."""

from __future__ import annotations

from stackrace.base.errors import StackraceError


class DbError(StackraceError, RuntimeError):
    """Anything that keeps the database from being usable, said in one line.

    `log_tail` holds the last lines of mariadbd's error log when the server failed to
    start, so a caller can show them under the message.
    """

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail

    def __str__(self) -> str:
        msg = super().__str__()
        if self.log_tail:
            return f"{msg}\n--- mariadbd log (last lines) ---\n{self.log_tail}"
        return msg


class SeedInterrupted(DbError):
    """Ctrl-C during a seed: the statement was stopped on the server too, and the message
    says in what state it left table `test` (the command exits 130 with it)."""

    exit_code = 130
