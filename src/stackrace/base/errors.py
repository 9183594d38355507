"""The one base of every error a user can act on.

Each package raises its own kind (`ConfigError`, `DbError`, `RequestError`, …) so that a
caller can catch what it can handle; every kind also derives from `StackraceError`, so
that the entry point (cli.py) catches the rest once and prints its message as one line,
`stackrace COMMAND: MESSAGE`, with the error's exit status, instead of a crash report.
A message names the file, stack or option it is about; it never needs a traceback.

The kinds keep their builtin base too (`ValueError` for bad input, `RuntimeError` for a
failed step, `OSError` for the machine's state), which is what older callers and the
standard library's own handlers expect.
"""

from __future__ import annotations

from stackrace.base.printable import terminal


class StackraceError(Exception):
    """An error whose message is for the user: one line, naming what is wrong."""

    exit_code = 1  # what the command exits with when nothing else catches it


class WithLogTail(StackraceError):
    """An error of a process that left a log (a stack's, mariadbd's): its last lines
    (`log_tail`) follow the message under a heading, printable whoever wrote them (a
    server's log, a cluster's app host's tail)."""

    tail_heading = "log tail"

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail

    def __str__(self) -> str:
        text = super().__str__()
        if self.log_tail:
            text += f"\n--- {self.tail_heading} ---\n" + terminal(self.log_tail, newlines=True)
        return text
