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


class StackraceError(Exception):
    """An error whose message is for the user: one line, naming what is wrong."""

    exit_code = 1  # what the command exits with when nothing else catches it
