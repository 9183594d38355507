"""`Poller`: one edge-triggered epoll per event loop for the engine's own sockets and
timers, whose descriptor the loop watches, so every ready socket of a batch is handled
in one loop callback.

The loop's reader for it is `Dispatcher` (engine/_cycle.c), a C object: a wake-up costs
no Python frame. While rate mode's timers are on the epoll (engine/timer.py), `poll` is
the reader instead, and due sends go before a batch's answers. Descriptors closed or
reused during a batch have their stale events dropped (a closed descriptor's number may
be handed to the next socket within the same batch). The transports that register on it
are engine/transport.py's and the C one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from select import EPOLLIN, epoll
from typing import ClassVar, Protocol

from stackrace.engine._cycle import Dispatcher


class Handler(Protocol):
    def on_event(self, events: int) -> None: ...


class Poller:
    """One epoll for the engine's sockets, watched by the event loop.

    The loop's reader for it is `dispatcher` (engine/_cycle.c), a C object: a wake-up
    costs no Python frame. While rate mode's timers are on the epoll, `poll` is the
    reader instead: due sends go first."""

    __slots__ = ("_loop", "dispatcher", "ep", "handlers", "stale", "timers")

    _by_loop: ClassVar[dict[int, Poller]] = {}

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.ep = epoll()
        self._loop = loop
        self.handlers: dict[int, Handler] = {}
        self.stale: set[int] = set()  # descriptors closed in this batch
        self.timers: set[int] = set()  # rate mode's timers (timer.DueTimer)
        # (its `dispatching` is true inside a batch: a descriptor closed then has the
        # batch's events for it dropped, `stale`)
        self.dispatcher = Dispatcher(self.ep.fileno(), self.handlers, self.stale)
        loop.add_reader(self.dispatcher.epfd, self.dispatcher)

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> Poller:
        """The loop's poller (made on first use)."""
        p = cls._by_loop.get(id(loop))
        if p is None or p._loop is not loop:
            for key, old in list(cls._by_loop.items()):
                if old._loop.is_closed():  # a finished loop's poller: let its epoll go
                    old.ep.close()
                    del cls._by_loop[key]
            p = cls._by_loop[id(loop)] = cls(loop)
        return p

    def forget(self, fd: int) -> None:
        """The descriptor is about to be closed (closing it leaves the epoll by itself).
        Its number may be given to the next socket at once: events of this batch for
        it are the old socket's, and are dropped."""
        self.handlers.pop(fd, None)
        if self.dispatcher.dispatching:
            self.stale.add(fd)

    def add_timer(self, fd: int, handler: Handler) -> None:
        self.handlers[fd] = handler
        if not self.timers:  # the first: due sends must go before a batch's answers
            self._loop.remove_reader(self.dispatcher.epfd)
            self._loop.add_reader(self.dispatcher.epfd, self.poll)
        self.timers.add(fd)
        self.ep.register(fd, EPOLLIN)  # level-triggered: the timer reads itself clear

    def remove_timer(self, fd: int) -> None:
        self.forget(fd)
        self.timers.discard(fd)
        self.ep.unregister(fd)
        if not self.timers and not self._loop.is_closed():
            self._loop.remove_reader(self.dispatcher.epfd)
            self._loop.add_reader(self.dispatcher.epfd, self.dispatcher)

    def poll(self) -> None:
        """The reader while timers are on the epoll (rate mode)."""
        events = self.ep.poll(0)
        handlers = self.handlers
        stale = self.stale
        self.dispatcher.dispatching = True
        try:
            # due sends first: a batch of responses must not make them late
            timers = self.timers
            for fd, ev in events:
                if fd in timers:
                    handlers[fd].on_event(ev)
            for fd, ev in events:
                if fd in timers or (stale and fd in stale):
                    continue
                h = handlers.get(fd)
                if h is not None:
                    h.on_event(ev)
        finally:
            self.dispatcher.dispatching = False
            stale.clear()

    def call_soon(self, callback: Callable[..., object], *args: object) -> None:
        self._loop.call_soon(callback, *args)
