"""The fast tier's guard: a test under `tests/unit/` starts no process and opens no
connection, so that tier stays the inner loop (`./dev test --fast`, under a minute).

A unit test that starts a server, a stack, the engine process or the database is not a
unit test however quick it is on an idle machine: on CI's loaded two cores it is where the
minutes and the flakes come from. Rather than trust each author to remember, the calls
that start something real are replaced, for the setup, call and teardown of every test
under `tests/unit/`, by stand-ins that record the call and raise `CostlyCall`:

- processes: `subprocess.Popen` (so `subprocess.run`, `os.popen` and asyncio's
  subprocesses), `os.fork`, `os.forkpty`, `os.posix_spawn[p]`, `os.system`, the
  fork-exec that `multiprocessing` uses, and uvloop's own (libuv) subprocesses;
- connections: `socket.connect`/`connect_ex` (every client: urllib, aiohttp, pymysql,
  aiomysql, asyncio's loop, the engine's own sockets), `socket.listen` (an in-process
  server), and uvloop's `create_connection`/`create_server`, which reach libuv without a
  Python socket.

What stays allowed is what touches nothing outside the process: a `socketpair` (every
asyncio loop makes one to wake itself), binding a port without listening (how a free
port is found), reading files, threads, Textual's Pilot on synthetic data.

The stand-in raises, but code under test may catch broad exceptions (a launcher turns an
`OSError` into a message), so the hooks also fail the test afterwards whenever a call was
recorded: a swallowed call still fails, naming what was attempted and where the test
belongs instead. `tests/unit/conftest.py` takes the hooks; `pytest -p tests.costguard
tests/tui` applies them to another folder, to find the tests there that could move to
the fast tier.
"""

from __future__ import annotations

import _posixsubprocess
import asyncio
import contextlib
import os
import socket
import subprocess
from collections.abc import Callable, Generator, Iterator
from typing import Any, NoReturn

import pytest
import uvloop

MOVE_HINT = (
    "tests/unit starts no process and opens no connection (tests/costguard.py): "
    "a test that needs a real server, process or database belongs in tests/integration, "
    "tests/hardening, tests/tui or tests/walkthrough"
)


class CostlyCall(Exception):
    """A unit test tried to start a process or open a connection."""


def _first_arg(args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> object:
    return args[0] if args else kwargs.get(name, "?")


def _refuse(
    found: list[str], what: str, describe: Callable[[tuple[Any, ...], dict[str, Any]], object]
) -> Callable[..., NoReturn]:
    def stand_in(*args: Any, **kwargs: Any) -> NoReturn:
        call = f"{what}({describe(args, kwargs)!r})"
        found.append(call)
        raise CostlyCall(f"{call}: {MOVE_HINT}")

    return stand_in


def _async_refuse(
    found: list[str], what: str, describe: Callable[[tuple[Any, ...], dict[str, Any]], object]
) -> Callable[..., Any]:
    refuse = _refuse(found, what, describe)

    async def stand_in(*args: Any, **kwargs: Any) -> NoReturn:
        refuse(*args, **kwargs)

    return stand_in


@contextlib.contextmanager
def no_processes_or_connections() -> Iterator[list[str]]:
    """Refuse every way to start a process or open a connection inside the block; yields
    the list of the calls attempted (each also raised `CostlyCall` where it was made)."""
    found: list[str] = []

    def after_self(name: str) -> Callable[[tuple[Any, ...], dict[str, Any]], object]:
        return lambda args, kwargs: _first_arg(args[1:], kwargs, name)

    def plain(name: str) -> Callable[[tuple[Any, ...], dict[str, Any]], object]:
        return lambda args, kwargs: _first_arg(args, kwargs, name)

    def address(args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
        # create_connection(protocol_factory, host, port) / create_server(factory, host, port)
        return args[2:4] if len(args) > 2 else kwargs.get("host", kwargs.get("sock", "?"))

    refused: list[tuple[object, str, Callable[..., Any]]] = [
        (subprocess.Popen, "__init__", _refuse(found, "subprocess.Popen", after_self("args"))),
        (os, "fork", _refuse(found, "os.fork", plain("-"))),
        (os, "forkpty", _refuse(found, "os.forkpty", plain("-"))),
        (os, "posix_spawn", _refuse(found, "os.posix_spawn", plain("path"))),
        (os, "posix_spawnp", _refuse(found, "os.posix_spawnp", plain("path"))),
        (os, "system", _refuse(found, "os.system", plain("command"))),
        (_posixsubprocess, "fork_exec", _refuse(found, "fork_exec", plain("args"))),
        (socket.socket, "connect", _refuse(found, "socket.connect", after_self("address"))),
        (socket.socket, "connect_ex", _refuse(found, "socket.connect_ex", after_self("address"))),
        (socket.socket, "listen", _refuse(found, "socket.listen", lambda a, k: a[0])),
    ]
    # uvloop reaches libuv directly: its connections, servers and children never pass
    # through the socket or subprocess modules above.
    for method in ("create_connection", "create_server", "create_unix_connection"):
        refused.append((uvloop.Loop, method, _async_refuse(found, f"uvloop {method}", address)))
    for method in ("subprocess_exec", "subprocess_shell"):
        for loop_class in (uvloop.Loop, asyncio.BaseEventLoop):
            refused.append((loop_class, method, _async_refuse(found, f"loop.{method}", address)))
    with pytest.MonkeyPatch.context() as patch:
        for owner, name, stand_in in refused:
            patch.setattr(owner, name, stand_in)
        yield found


def _guarded(item: pytest.Item) -> Generator[None, object, object]:
    with no_processes_or_connections() as found:
        try:
            result = yield
        except BaseException:
            if not found:
                raise
        if found:  # raised and failed the test, or swallowed by the code under test
            message = f"{item.nodeid}: {', '.join(found)}: {MOVE_HINT}"
            raise pytest.fail.Exception(message, pytrace=False) from None
        return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _guarded(item))
