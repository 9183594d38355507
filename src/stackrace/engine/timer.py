"""A one-shot timer with nanosecond resolution for rate mode: a timerfd on the engine's epoll.

Rate mode sends request k at t0 + k/rate. The event loop's own timers cannot do that:
libuv counts time in milliseconds, so a request scheduled with `call_later` leaves on
average half a millisecond late, and its corrected latency carries that error (measured
before this timer: corrected p50 6.15–6.39 ms against a 5 ms server where vegeta read
5.78–5.94 ms). A timerfd armed at the absolute CLOCK_MONOTONIC time of the next due
request (the clock `time.perf_counter_ns` reads) wakes the engine's epoll when it is due,
not on the next millisecond; the engine process asks the kernel for a timer slack of
1 µs (`PR_SET_TIMERSLACK`, worker.py) instead of the default 50 µs.

The timer is armed once per wake-up, for the next request due: at 20,000 req/s that
is at most 20,000 `timerfd_settime` calls and reads a second (~2 µs each, through ctypes).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Callable
from select import EPOLLIN
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stackrace.engine.poller import Poller

_CLOCK_MONOTONIC = 1
_TFD_TIMER_ABSTIME = 1
_PR_SET_TIMERSLACK = 29


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


_libc = ctypes.CDLL(None, use_errno=True)
_timerfd_create = _libc.timerfd_create
_timerfd_settime = _libc.timerfd_settime
_timerfd_settime.argtypes = [
    ctypes.c_int,
    ctypes.c_int,
    ctypes.POINTER(_Itimerspec),
    ctypes.c_void_p,
]


def fine_timer_slack() -> None:
    """Ask the kernel to wake this process's timers within 1 µs of their time (the
    default slack is 50 µs): rate mode's sends are due to the microsecond."""
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the default slack
        _libc.prctl(_PR_SET_TIMERSLACK, 1, 0, 0, 0)


class DueTimer:
    """Calls `callback` once the CLOCK_MONOTONIC time given to `at` has come."""

    __slots__ = ("_ref", "_spec", "armed", "callback", "fd", "poller")

    def __init__(self, poller: Poller, callback: Callable[[], None]) -> None:
        fd = _timerfd_create(_CLOCK_MONOTONIC, os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"timerfd_create: {os.strerror(err)}")
        self.fd = fd
        self.poller = poller
        self.callback = callback
        self.armed = 0  # the time it is armed for (0: not armed)
        self._spec = _Itimerspec()
        self._ref = ctypes.byref(self._spec)
        poller.add_timer(fd, self)

    def at(self, ns: int) -> None:
        """Fire at `ns` (perf_counter_ns time; a time past fires at once)."""
        if ns <= 0:
            ns = 1
        value = self._spec.it_value
        value.tv_sec, value.tv_nsec = divmod(ns, 1_000_000_000)
        _timerfd_settime(self.fd, _TFD_TIMER_ABSTIME, self._ref, None)
        self.armed = ns

    def cancel(self) -> None:
        if self.armed:
            value = self._spec.it_value
            value.tv_sec = value.tv_nsec = 0  # a zero time disarms
            _timerfd_settime(self.fd, _TFD_TIMER_ABSTIME, self._ref, None)
            self.armed = 0

    def on_event(self, ev: int) -> None:
        if not ev & EPOLLIN:
            return
        try:
            os.read(self.fd, 8)  # the expiry count: reading it clears the readiness
        except BlockingIOError:
            return  # re-armed after it fired: that expiry no longer counts
        self.armed = 0
        self.callback()

    def close(self) -> None:
        self.poller.remove_timer(self.fd)
        os.close(self.fd)
        self.fd = -1
