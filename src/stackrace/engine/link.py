"""How a driver reaches one engine process: commands in, messages out.

`Engine` (client.py) never touches a process directly; it talks to `EngineLink`s. The
local link starts `python -m stackrace.engine.worker` as a child and speaks the channel
(channel.py) over its stdin/stdout. Another link can carry the same lines elsewhere (the
cluster package runs the worker on another host and relays them), and `Engine` merges
the reports exactly the same way.

A link promises:
- `open()` returns once the process can be commanded, or raises `LinkError`;
- `send()` never blocks (the channel is a few short lines a second);
- `messages()` yields every message in order and ends when the process has exited;
- `close()` ends the process: stdin closed, then killed after `grace` seconds;
- `discard()` ends it at once, waiting for nothing: the process was lost (its host is
  gone or silent), and a graceful close would only wait for an answer that never comes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Protocol

import msgspec

from stackrace.base.errors import StackraceError
from stackrace.engine import early
from stackrace.engine.channel import Command, Message, command_encoder, message_decoder


class LinkError(StackraceError, RuntimeError):
    """An engine process could not be started or reached."""


class EngineLink(Protocol):
    index: int
    description: str  # where it runs, for messages ("local pid 1234", "node …")
    host: str  # the host it runs on ("local", or a cluster node's address)

    async def open(self) -> None: ...
    def send(self, cmd: Command) -> None: ...
    def messages(self) -> AsyncIterator[Message | str]: ...
    @property
    def alive(self) -> bool: ...
    async def close(self, grace: float = 2.0) -> None: ...
    def discard(self) -> None: ...


async def spawn_engine(
    cpus: Sequence[int] | None = None, limit: int | None = None
) -> asyncio.subprocess.Process:
    """Start one engine process (`python -m stackrace.engine.worker`), pinned to `cpus`.

    The one way an engine process is started, here and on a cluster's load hosts
    (cluster/engine_actor.py): its own session, so Ctrl-C in the terminal reaches only
    the driver; it follows its parent's death itself (engine/worker.py). `limit` is the
    stdout reader's line limit (a report with a wide histogram can be long). OSError
    when it cannot be started.
    """
    argv = early.ENGINE_ARGV
    pipe = asyncio.subprocess.PIPE
    if limit:  # the stream reader's buffer, for reports larger than its default
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=pipe, stdout=pipe, stderr=None, start_new_session=True, limit=limit
        )
    else:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=pipe, stdout=pipe, stderr=None, start_new_session=True
        )
    if cpus:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(proc.pid, set(cpus))
    return proc


async def end_engine(
    proc: asyncio.subprocess.Process | early.AdoptedEngine, grace: float = 2.0
) -> int | None:
    """End an engine process: stdin closed (it exits on its own), killed after `grace`
    seconds if it has not. Its exit code. The one way an engine process is closed."""
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        async with asyncio.timeout(grace):
            await proc.wait()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
    return proc.returncode


# Builds the link for engine process number `index`, pinned to `cpus` when given.
LinkFactory = Callable[[int, Sequence[int] | None], EngineLink]


class LocalLink:
    """An engine process on this machine, a child of the driver."""

    def __init__(self, index: int, cpus: Sequence[int] | None = None) -> None:
        self.index = index
        self.cpus = list(cpus) if cpus else None
        self.description = "local"
        self.host = "local"
        self._proc: asyncio.subprocess.Process | early.AdoptedEngine | None = None

    async def open(self) -> None:
        # the one started while the command imported (engine/early.py), when there is one
        self._proc = await early.adopt()
        if self._proc is not None:
            if self.cpus:
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(self._proc.pid, set(self.cpus))
        else:
            try:
                self._proc = await spawn_engine(self.cpus)
            except OSError as exc:
                raise LinkError(f"cannot start an engine process: {exc}") from None
        self.description = f"local pid {self._proc.pid}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def send(self, cmd: Command) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.returncode is not None:
            return
        with contextlib.suppress(ConnectionError, RuntimeError):
            proc.stdin.write(command_encoder.encode(cmd) + b"\n")

    async def messages(self) -> AsyncIterator[Message | str]:
        """Decoded messages; a line that does not decode is yielded as an error string."""
        assert self._proc is not None and self._proc.stdout is not None
        stdout = self._proc.stdout
        while True:
            try:
                line = await stdout.readline()
            except (ValueError, asyncio.LimitOverrunError):
                line = await stdout.readuntil(b"\n")  # a line over the stream limit
            if not line:
                return
            try:
                yield message_decoder.decode(line)
            except msgspec.DecodeError as exc:
                yield f"unreadable message: {exc}"

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    async def close(self, grace: float = 2.0) -> None:
        if self._proc is not None:
            await end_engine(self._proc, grace)

    def discard(self) -> None:
        proc = self._proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()


def local_links(index: int, cpus: Sequence[int] | None) -> EngineLink:
    return LocalLink(index, cpus)
