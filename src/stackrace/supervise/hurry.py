"""The user's second Ctrl-C: stop waiting for servers to stop gracefully.

The first Ctrl-C (or SIGTERM, SIGHUP) asks every stack to stop: SIGTERM to its process
groups, then up to its `stop_timeout` for it to go. A server that ignores SIGTERM, or
a stacks file with a long `stop_timeout`, would then hold the user; pressing Ctrl-C
again means "now": `hurry()` makes every launcher's wait end at once, and the stacks'
process groups get SIGKILL. One flag per process, since the user's insistence is the
whole process's, whichever front end (serve, bench, the app) received it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

_hurried = threading.Event()


def hurry() -> None:
    _hurried.set()


def hurried() -> bool:
    return _hurried.is_set()


def reset() -> None:
    """Forget a hurry (tests; a process that goes on after a race was cut short)."""
    _hurried.clear()


def escalating(
    first: Callable[[], None], then: Callable[[], None] | None = None
) -> Callable[[], None]:
    """A signal handler: `first()` on the first signal; on every later one, `hurry()`
    (and `then()`, e.g. to say so)."""
    seen = False

    def handler() -> None:
        nonlocal seen
        if not seen:
            seen = True
            first()
            return
        hurry()
        if then is not None:
            then()

    return handler
