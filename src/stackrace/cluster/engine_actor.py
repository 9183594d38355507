"""`EngineHost`: the Ray actor on a load node that runs one engine process and relays its
channel.

The engine process is the same `python -m stackrace.engine.worker` a local run starts,
a child of the actor: its uvloop runs there, never inside the actor's event loop, so
Ray's own work cannot slow the measurement. The actor only moves lines:

- commands: the driver sends batches of command lines numbered 0, 1, 2, …; Ray does not
  promise that an async actor runs calls in the order they were made, so they are put
  back in order here before they reach the engine's stdin;
- messages: the engine's stdout lines are buffered; the driver long-polls `pull()`, one
  call at a time, and gets every line that came since (a report every 250 ms, so a
  pull carries one or a few lines).

What reaches the driver is the interval reports, never anything per request.

No orphans: the engine process asks the kernel to kill it when its parent dies
(PR_SET_PDEATHSIG, engine/worker.py) and exits when its stdin closes, so when Ray kills
this actor (its driver died, or it was killed), the engine goes with it.

No load nobody counts: a host cut off from the driver (a partition) is declared lost by
the driver after `lost_after` seconds of silence, and its requests in flight are counted
abandoned. Ray cannot kill this actor while the host is unreachable, and when the link
comes back its engine would go on loading the stacks, counted by nobody. So the actor
watches the driver too: no call (a command batch or a long-poll, several a second while
a race runs) for `lost_after` seconds, and it kills its engine; the driver's next pull,
if one ever comes, learns that it ended.

The class is plain Python; `stackrace.cluster.run` turns it into an actor with
`ray.remote`, so this module is importable (and its logic testable) without Ray.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from stackrace.cluster.hostinfo import HostInfo, current_node_id, normal_priority, this_host
from stackrace.engine.link import end_engine, spawn_engine

_LINE_LIMIT = 16 * 1024 * 1024  # a report line with a wide histogram can be long


class EngineHost:
    def __init__(
        self, node_id: str, cpus: tuple[int, ...] = (), lost_after: float | None = None
    ) -> None:
        self.node_id = node_id
        self.cpus = cpus
        self.lost_after = lost_after
        self.orphaned = ""  # why it stopped its engine on its own
        self._last_call = time.monotonic()
        self._watchdog: asyncio.Task[None] | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._lines: list[bytes] = []
        self._more: asyncio.Event | None = None
        self._ended = False
        self._next_seq = 0
        self._waiting: dict[int, bytes] = {}

    async def start(self) -> HostInfo:
        """Start the engine process; return this node's description once it runs."""
        # Started from the actor's event-loop thread, which lives as long as the actor:
        # the engine's PR_SET_PDEATHSIG follows the thread that forked it.
        self._more = asyncio.Event()
        normal_priority()  # the engine process inherits it: see hostinfo.normal_priority
        self._proc = await spawn_engine(self.cpus, limit=_LINE_LIMIT)
        self._reader = asyncio.create_task(self._read())
        self._last_call = time.monotonic()
        if self.lost_after:
            self._watchdog = asyncio.create_task(self._watch_driver(self.lost_after))
        return this_host(current_node_id())

    async def _watch_driver(self, lost_after: float) -> None:
        """Kill the engine when the driver has not called for `lost_after` seconds."""
        proc = self._proc
        while proc is not None and proc.returncode is None:
            await asyncio.sleep(min(0.5, lost_after / 4))
            silent = time.monotonic() - self._last_call
            if silent > lost_after:
                self.orphaned = f"no word from the driver for {silent:.1f}s"
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                return

    def why_ended(self) -> str:
        """Why the engine ended on its own ("" if it did not): the driver's silence, or
        its exit status (a negative one: the signal that ended it), so that an engine that
        exits at start is not a mystery (its stderr is this actor's, in Ray's logs)."""
        if self.orphaned:
            return self.orphaned
        code = self._proc.returncode if self._proc is not None else None
        if not code:  # running, or ended as asked (stdin closed, Stop)
            return ""
        if code > 0:
            return f"the engine process exited with status {code}"
        return f"the engine process was ended by signal {-code}"

    def pid(self) -> int | None:
        """The engine process's pid on this node (for tests and messages)."""
        return self._proc.pid if self._proc is not None else None

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        assert self._more is not None
        stdout = self._proc.stdout
        while True:
            line = await stdout.readline()
            if not line:
                break
            self._lines.append(line)
            self._more.set()
        await self._proc.wait()
        self._ended = True
        self._more.set()

    def send(self, seq: int, data: bytes) -> None:
        """Command lines, batch number `seq`: written in batch order, whatever the order
        of arrival."""
        self._last_call = time.monotonic()
        self._waiting[seq] = data
        proc = self._proc
        while self._next_seq in self._waiting:
            chunk = self._waiting.pop(self._next_seq)
            self._next_seq += 1
            if proc is None or proc.stdin is None or proc.returncode is not None:
                continue
            with contextlib.suppress(ConnectionError, RuntimeError):
                proc.stdin.write(chunk)

    async def pull(self, wait: float = 1.0) -> tuple[list[bytes], bool]:
        """Every line since the last pull (waiting up to `wait` s for one), and whether
        the engine process has exited (then no line will follow)."""
        self._last_call = time.monotonic()
        assert self._more is not None
        if not self._lines and not self._ended:
            self._more.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._more.wait()
        lines, self._lines = self._lines, []
        return lines, self._ended and not self._lines

    async def close(self, grace: float = 2.0) -> int | None:
        """End the engine process: stdin closed, killed after `grace` s. Its exit code."""
        proc = self._proc
        if proc is None:
            return None
        code = await end_engine(proc, grace)
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        return code
