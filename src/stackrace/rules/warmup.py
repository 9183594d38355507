"""When a freshly loaded stack has warmed up: the rule behind the WARMING state.

A JIT (PyPy) serves slowly at first and faster as it compiles the hot paths, so its
req/s climbs for tens of seconds at a constant load; a CPython stack's req/s is steady
within a second or two. The rule, per stack, from its first load:

- req/s is averaged into one-second points (`POINT_SECONDS`), at one load level only:
  a level change restarts the points, and the first second after it (or after the
  first load) is left out, since connections opening blur it;
- the stack has **settled** when its req/s stopped climbing: the mean of its last two
  points is less than `SETTLE_BAND` (5 %) above the mean of the two before
  (`SETTLE_POINTS` = 4 points), or it served nothing in them (nothing to warm). Noise
  does not keep a stack warming (a req/s that wobbles on a shared core does not climb);
  only a steady rise does. It is **warming** until then, at most `MAX_WARMING` seconds
  of load;
- a level change before that settles it when the points at the old level (two or more)
  were not climbing: a ramp's short levels must not keep every stack "warming"; a
  stack still climbing stays warming;
- once settled it stays settled: warming happens once per process, and a later dip is
  the load's doing (a verdict tells that story), not the JIT's.

So every stack shows "warming" for its first few seconds (CPython: about five), and a
JIT stack for as long as its throughput keeps climbing. No I/O, no UI: the session feeds
it each new snapshot's interval.
"""

from __future__ import annotations

from dataclasses import dataclass, field

POINT_SECONDS = 1.0
SETTLE_POINTS = 4
SETTLE_BAND = 0.05
MAX_WARMING = 120.0
SKIP_SECONDS = 1.0  # after the first load or a level change


@dataclass
class WarmupTracker:
    """Feed it each interval of one stack; `warming` says whether it still climbs."""

    settled: bool = False
    loaded_for: float = 0.0  # seconds of load seen
    points: list[float] = field(default_factory=list)  # one-second req/s means, this level
    first: float | None = None  # the first point after the first load: how far it climbed
    _level: int | None = None
    _skip: float = SKIP_SECONDS
    _acc_requests: float = 0.0
    _acc_seconds: float = 0.0

    @property
    def warming(self) -> bool:
        return not self.settled

    def feed(self, level: int, requests: int, seconds: float) -> None:
        """One interval: the level it ran at, the answers in it and its length."""
        if self.settled or seconds <= 0:
            return
        self.loaded_for += seconds
        if level != self._level:
            if len(self.points) >= 2 and not climbing(self.points[:1], self.points[-1:]):
                self.settled = True
                return
            self._level = level
            self.points.clear()
            self._skip = SKIP_SECONDS
            self._acc_requests = self._acc_seconds = 0.0
        if self._skip > 0:
            self._skip -= seconds
            return
        self._acc_requests += requests
        self._acc_seconds += seconds
        if self._acc_seconds + 1e-9 >= POINT_SECONDS:
            point = self._acc_requests / self._acc_seconds
            self._acc_requests = self._acc_seconds = 0.0
            self.points.append(point)
            if self.first is None:
                self.first = point
            del self.points[:-SETTLE_POINTS]
        if self.loaded_for >= MAX_WARMING or is_settled(self.points):
            self.settled = True

    def climb(self) -> float | None:
        """How much req/s rose from the first point to the last, as a fraction."""
        if not self.points or not self.first:
            return None
        return self.points[-1] / self.first - 1.0


def is_settled(points: list[float]) -> bool:
    """Four points or more, and the last two not above the two before by SETTLE_BAND."""
    if len(points) < SETTLE_POINTS:
        return False
    half = SETTLE_POINTS // 2
    return not climbing(points[-SETTLE_POINTS:-half], points[-half:])


def climbing(before: list[float], after: list[float]) -> bool:
    """Whether the mean of `after` is more than SETTLE_BAND above the mean of `before`
    (nothing served in either: nothing climbs)."""
    a = sum(before) / len(before)
    b = sum(after) / len(after)
    if a <= 0:
        return b > 0
    return b > a * (1 + SETTLE_BAND)
