"""An engine process started early: while the command that will use it is still importing.

    early.start()                  # cli.py, before `load` imports its driver
    ...
    child = await early.adopt()    # engine/link.py's LocalLink.open: the child, or None

An engine process is a fresh interpreter that imports asyncio, uvloop and msgspec
(~0.2 s of a core); `load` imports its driver, the race core and the report writers
(~0.15 s) before it asks for one. Done one after the other, `stackrace load URL -n 1`
spent most of its wall time in the two start-ups; on a machine of two cores or more they
run side by side when the child is started first, from a module that imports nothing
but `subprocess` (bench/startup.py measures it against hey and wrk).

The child is the one `engine/link.py` would start (`spawn_engine`: the same command, its
own session, its parent's death followed by the worker itself); it waits on its pipe,
sending nothing but its `Ready` line, until the first `LocalLink` adopts it. A command
that never loads (a usage error) leaves it unadopted: at exit it is killed, silently (it
has done nothing yet); were the parent killed first, it would follow (worker.py).

Only one, the first local process: a second or a pinned one is started when asked, as
before (pinning is applied to the adopted one when it is adopted).
"""

from __future__ import annotations

import atexit
import contextlib
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio

ENGINE_ARGV = (sys.executable, "-m", "stackrace.engine.worker")

_early: subprocess.Popen[bytes] | None = None


def start() -> None:
    """Start the engine process now, to be adopted later; once per process. An OSError is
    left for the link to meet (and say) when it starts its own."""
    global _early
    if _early is not None:
        return
    try:
        _early = subprocess.Popen(
            ENGINE_ARGV,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,  # Ctrl-C in the terminal reaches only the driver
        )
    except OSError:
        return
    atexit.register(_discard)


def _discard() -> None:
    """Never adopted (a usage error, say): killed, not asked to end. It may still be
    importing, and a worker that finds its parent gone says so on the terminal the
    command shares with it (worker.py): a line after the command's one-line error."""
    global _early
    child, _early = _early, None
    if child is not None and child.poll() is None:
        with contextlib.suppress(OSError):
            child.kill()


class AdoptedEngine:
    """An early child as `asyncio.subprocess.Process` is used by the link: `pid`,
    `stdin` (a StreamWriter), `stdout` (a StreamReader), `returncode`, `wait()`,
    `kill()`."""

    def __init__(
        self,
        child: subprocess.Popen[bytes],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self._child = child
        self.pid = child.pid
        self.stdout = reader
        self.stdin = writer

    @property
    def returncode(self) -> int | None:
        return self._child.poll()

    async def wait(self) -> int:
        import asyncio  # loaded by then; not at the top, where it would delay start()

        # polled: the event loop's child watcher knows only the children it started
        while (code := self._child.poll()) is None:
            await asyncio.sleep(0.005)
        return code

    def kill(self) -> None:
        self._child.kill()


async def adopt(limit: int | None = None) -> AdoptedEngine | None:
    """The early engine process on this loop's pipes (once), or None when none was
    started or it has already ended (the link then starts one of its own)."""
    import asyncio  # loaded by then; not at the top, where it would delay start()

    global _early
    child, _early = _early, None
    if child is None or child.poll() is not None or child.stdin is None or child.stdout is None:
        return None
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit or 2**16, loop=loop)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), child.stdout
    )
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, child.stdin
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return AdoptedEngine(child, reader, writer)
