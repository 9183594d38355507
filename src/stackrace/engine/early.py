"""`load`'s engine process: forked from the driver once the command's imports are done.

    early.start()                  # cli.py, before `load` imports its driver: wanted
    early.fork()                   # commands/load.py, its options checked, no loop yet
    ...
    child = await early.adopt()    # engine/link.py's LocalLink.open: the child, or None

An engine process started as a fresh interpreter (`python -m stackrace.engine.worker`,
engine/link.py `spawn_engine`) imports asyncio, uvloop, msgspec and the engine (~0.11
CPU-s) while the driver imports them too; `load` imports its driver, the race core and
the report writers (~0.19 CPU-s) before it asks for one. Started first and side by side
(the round before this one) the two start-ups overlapped on two cores, but the CPU was
paid twice: a third of `stackrace load URL -n 1`'s and ~5 % of a 5-second load's
(bench/startup.py). A fork of the driver once its imports are done has every module the
worker needs loaded already: its start is the fork and a new event loop (~0.01 CPU-s).
The engine now starts after the driver's imports instead of beside them: on a quiet
machine `load -n 1` takes ~10 ms more wall time for ~0.08 CPU-s less; on a busy one,
where the second core was not free anyway, it is shorter in both (docs/development.md
"Start-up").

So `start()` only says that the command wants one (cli.py calls it for `load`, before
the parser is built); `fork()` makes it, from the command, before any event loop or
thread exists (a fork copies only the calling thread: with another one running it would
copy locks held by nobody, so then nothing is forked and the link starts one of its own,
as it does for every other command). The child is what `spawn_engine` starts: its own
session, its descriptors those of a new process (the pipes on 0 and 1, stderr shared,
every other one of the driver's closed, as exec closes them), the worker's `main()`, and
`os._exit`: none of the driver's exit handlers or buffered output is run twice. It waits
on its pipe, sending nothing but its `Ready` line, until the first `LocalLink` adopts it.
A command that never loads leaves it unadopted: at exit it is killed, silently (it has
done nothing yet); were the parent killed first, it would follow (worker.py).

Only one, the first local process: a second or a pinned one is started when asked, as
before (pinning is applied to the adopted one when it is adopted).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    import asyncio

ENGINE_ARGV = (sys.executable, "-m", "stackrace.engine.worker")


class ForkedEngine:
    """The forked child as much of `subprocess.Popen` as this module and AdoptedEngine
    use: `pid`, its pipes `stdin` and `stdout`, `poll()` and `kill()`."""

    def __init__(self, pid: int, stdin: BinaryIO, stdout: BinaryIO) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: gone, its status unknown
                self.returncode = -1
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


_wanted = False
_early: ForkedEngine | None = None


def start() -> None:
    """Say that this command will load: `fork()` then makes its engine process."""
    global _wanted
    _wanted = True


def fork() -> None:
    """Fork the engine process now, when `start()` asked for one and none was made yet:
    to be called with the command's imports done and before any event loop or thread
    starts. Nothing happens otherwise (the link then starts its own), nor on an OSError
    (the link meets it, and says it, when it starts its own)."""
    global _early, _wanted
    if not _wanted or _early is not None:
        return
    _wanted = False
    import threading  # lazy: loaded by then (asyncio's); the check needs no more

    if threading.active_count() > 1:
        return  # a fork would copy locks held by threads that do not exist in the child
    # the worker (and the engine under it) is needed only here: link.py imports this
    # module for every command that loads, bench's and the app's too
    from stackrace.engine import worker  # lazy: keeps the app's and bench's start-up fast

    try:
        down_r, down_w = os.pipe()  # commands: driver -> engine
        up_r, up_w = os.pipe()  # messages: engine -> driver
    except OSError:
        return
    try:
        pid = os.fork()
    except OSError:
        for fd in (down_r, down_w, up_r, up_w):
            os.close(fd)
        return
    if pid == 0:  # the child: the engine, never back in the driver's code
        _run_child(worker.main, down_r, up_w)
    os.close(down_r)
    os.close(up_w)
    _early = ForkedEngine(
        pid, os.fdopen(down_w, "wb", buffering=0), os.fdopen(up_r, "rb", buffering=0)
    )
    atexit.register(_discard)


def _run_child(main: object, stdin: int, stdout: int) -> None:
    """The forked engine: a process of its own, as `spawn_engine` starts one, then the
    worker's main(); it ends in os._exit, whatever happens."""
    code = 1
    try:
        os.setsid()  # Ctrl-C in the terminal reaches only the driver
        os.dup2(stdin, 0)
        os.dup2(stdout, 1)
        os.closerange(3, 1 << 20)  # the driver's descriptors, as exec would close them
        sys.stdin = open(0, "rb", buffering=0, closefd=False)  # noqa: SIM115 (the process's)
        main()  # type: ignore[operator]  # worker.main
        code = 0
    except SystemExit as exc:  # the worker's one-line refusals
        if isinstance(exc.code, int):
            code = exc.code
        elif exc.code is not None:
            with contextlib.suppress(OSError):
                os.write(2, f"{exc.code}\n".encode())
    except BaseException:  # the child says it, then ends: it never returns
        with contextlib.suppress(BaseException):
            import traceback  # lazy: only for a crash

            traceback.print_exc()
    finally:
        os._exit(code)


def _discard() -> None:
    """Never adopted (a usage error, say): killed, not asked to end."""
    global _early
    child, _early = _early, None
    if child is not None:
        child.kill()


class AdoptedEngine:
    """The forked child as `asyncio.subprocess.Process` is used by the link: `pid`,
    `stdin` (a StreamWriter), `stdout` (a StreamReader), `returncode`, `wait()`,
    `kill()`."""

    def __init__(
        self,
        child: ForkedEngine,
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
        import asyncio  # lazy: loaded by then; at the top it would delay start-up

        # polled: the event loop's child watcher knows only the children it started
        while (code := self._child.poll()) is None:
            await asyncio.sleep(0.005)
        return code

    def kill(self) -> None:
        self._child.kill()


async def adopt(limit: int | None = None) -> AdoptedEngine | None:
    """The forked engine process on this loop's pipes (once), or None when none was
    forked or it has already ended (the link then starts one of its own)."""
    import asyncio  # lazy: loaded by then; at the top it would delay start-up

    global _early
    child, _early = _early, None
    if child is None or child.poll() is not None:
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
