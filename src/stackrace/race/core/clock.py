"""The race's clock: what time it is, and how a driver waits.

    now = core.clock()            # seconds, monotonic
    await core.clock.sleep(0.25)  # a driver's wait (bench's levels, waiting for ready)

The race core owns one (race/core/core.py) and every driver reads time and sleeps through
it, never through `time.monotonic` or `asyncio.sleep` of its own. On a real race it is
`RealClock`: time passes by itself and a sleep waits for it. On the synthetic engine it
is the engine's `SteppedClock` (race/live/demo.py): time is the engine's step count, and a
sleep *makes* time pass by stepping the engine, so bench's whole level protocol —
warm-up, drain, repeats, the breaking rule — runs in a unit test in milliseconds, with
the same code a real bench runs (uvicorn's tests drive its protocol on a `MockLoop` the
same way).

A clock is called like `time.monotonic` (a recorder or a database watch takes it as a
plain callable), and has one more member, `sleep`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol


class RaceClock(Protocol):
    """What time it is on this race, and a wait that lets that much of it pass."""

    def __call__(self) -> float: ...
    async def sleep(self, seconds: float) -> None: ...


class RealClock:
    """Time that passes by itself: `read` (time.monotonic, or a replay's position,
    which its player moves on in real time), and `asyncio.sleep`."""

    def __init__(self, read: Callable[[], float] = time.monotonic) -> None:
        self.read = read

    def __call__(self) -> float:
        return self.read()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))
