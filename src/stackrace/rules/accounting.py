"""Checks that a window's figures add up, and whether the engine limited them.

Pure functions of a `WindowStats` (and what was asked of the engine), shared by the
app's panes and every bench report, so both flag the same things the same way.

- **Little's law** (L = λW): the engine samples how many requests are in flight every
  50 ms; their time-average is L, measured. The answers explain λW = req/s × mean
  latency of them. A closed loop of C connections keeps L ≈ C. Two ways a window does
  not add up, each flagged with its reason:
    * λW far below L: the answers describe only some of the clients; the others waited
      without an answer in the window (a queue still growing: the classic way a load
      tester flatters a server that stopped answering). The waiting count says how many;
    * L far below C: connections sat idle instead of carrying requests (they spent the
      window failing to connect, the engine could not keep up, or a budget ran out).
- **Engine-limited**: the figures are partly the engine's when its own delay is
  `ENGINE_LIMITED` or more of the mean latency it measured — its delay is its event
  loop's lag (sampled every 5 ms) plus how long each of its wake-ups waited for a core
  (run-queue time per wake-up, from the kernel) —, when it waited for a core
  `ENGINE_STARVED` % of the window or more (another process took its core: responses
  sat unread), or when it ran near 100 % of its core (saturated). The pane and the
  reports say which, and by how much.
- **Connections-limited** (rate mode): most of the requests still waiting at the end
  were never written, because every connection was busy. The connection count (a
  client setting) held them: at the latency measured, C connections carry C / latency
  req/s, and the rate asked needs rate × latency of them (Little). Whether the server
  keeps up with the rate is not known from such a run, so it is not said to have
  fallen behind (nor to have kept up).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stackrace.engine.model import ABANDONED, RESPONSE_FAILURES, WindowStats
from stackrace.settings.units import fmt_us

# λW within this factor of L (and L of C), or the window is flagged. Generous: a window
# of a few seconds at high latency has edge effects (requests that straddle its ends).
LITTLE_LOW = 0.8
LITTLE_HIGH = 1.25
# The engine's lag above this share of the mean latency: engine-limited.
ENGINE_LIMITED = 0.2
# The engine waiting for a CPU this percent of the window or more: engine-limited.
ENGINE_STARVED = 20.0
# Below this much lag the engine is never the story (a loop turn costs a few µs).
ENGINE_LAG_FLOOR_US = 200


@dataclass(frozen=True)
class LittleCheck:
    """C connections asked; L requests in flight on average; λW explained by answers."""

    connections: int
    in_flight: float  # L, measured
    explained: float  # λW = req/s × mean latency
    ok: bool
    reason: str = ""

    @property
    def accounted(self) -> float:
        return self.explained

    def describe(self) -> str:
        if self.ok:
            return ""
        return (
            f"Little's law does not add up: {self.connections:,} connections, "
            f"{self.in_flight:,.0f} requests in flight on average, answers explain "
            f"{self.explained:,.0f} ({self.reason})"
        )


def no_answer_failures(window: WindowStats) -> int:
    """Failures without a response that the server is to blame for (not `abandoned`)."""
    return sum(
        n for k, n in window.failures.items() if k not in RESPONSE_FAILURES and k != ABANDONED
    )


def little_check(window: WindowStats, connections: int, budget: bool = False) -> LittleCheck | None:
    """Check a closed-loop window (None in rate mode, or with too little to judge)."""
    if connections <= 0 or window.seconds < 0.5 or window.requests + window.waiting < 5:
        return None
    timed = window.span_seconds or window.seconds
    explained = window.requests / timed * window.latency.mean / 1e6
    L = window.in_flight
    if L <= 0:
        return None
    reason = ""
    if explained < LITTLE_LOW * L:
        reason = (
            f"the other {L - explained:,.0f} waited without an answer: "
            f"{window.waiting:,} still waiting at the end"
            + (f", the oldest for {window.oldest_wait_us / 1e6:.1f}s" if window.waiting else "")
        )
    elif explained > LITTLE_HIGH * L:
        reason = (
            f"{window.carried_in:,} requests were already waiting when the window began and "
            "their whole wait counts in its latency"
        )
    elif not budget and LITTLE_LOW * connections > L:
        reason = _idle_reason(window)
    return LittleCheck(connections, L, explained, not reason, reason)


def _idle_reason(window: WindowStats) -> str:
    lost = no_answer_failures(window)
    if lost and lost >= 0.1 * (window.requests + lost):
        return f"connections sat idle: they spent the window failing ({lost:,} got no answer)"
    if engine_share(window) >= ENGINE_LIMITED:
        return "connections sat idle: the engine could not keep them busy (engine-limited)"
    if window.failures.get(ABANDONED):
        return "connections sat idle: the engine retired them when the load changed"
    return "connections sat idle between requests (reconnects, or the engine was late)"


def engine_delay_us(window: WindowStats) -> float:
    """The engine's mean delay before acting on a response: loop lag + wait for a core."""
    return (window.lag.mean if window.lag.count else 0.0) + window.engine_wait_us


def engine_share(window: WindowStats) -> float:
    """The engine's mean delay as a share of the mean latency (0 when not measurable)."""
    lat = window.latency
    delay = engine_delay_us(window)
    if lat.count == 0 or lat.mean <= 0 or delay < ENGINE_LAG_FLOOR_US:
        return 0.0
    return min(1.0, delay / lat.mean)


def engine_limited(window: WindowStats, saturated: bool = False) -> bool:
    return bool(engine_limit(window, saturated))


def engine_limit(window: WindowStats, saturated: bool = False) -> str:
    """Why the engine limited this window's figures, and by how much ("" if it did not)."""
    if saturated:
        return f"engine saturated ({window.engine_cpu:.0f}% of its core)"
    if window.engine_wait >= ENGINE_STARVED:
        return (
            f"its engine waited for a core {window.engine_wait:.0f}% of the time "
            f"({window.engine_wait_us:,.0f}µs per wake-up)"
        )
    share = engine_share(window)
    if share < ENGINE_LIMITED:
        return ""
    if window.engine_wait_us > (window.lag.mean if window.lag.count else 0.0):
        return (
            f"its engine waited {window.engine_wait_us:,.0f}µs for a core per wake-up: "
            f"{share:.0%} of the latency"
        )
    return f"engine lag is {share:.0%} of the latency"


def connections_limit(window: WindowStats, connections: int, rate: float) -> str:
    """Why a rate-mode window fell behind when its connections held the requests ('' when
    they did not): most of those waiting at the end were never written. Says what the
    connections can carry at the latency measured, and how many the rate needs (Little:
    rate × time per request)."""
    w = window
    if not w.waiting or w.unsent * 2 < w.waiting:
        return ""
    per = w.latency_uncorrected or w.latency  # one request's time on its connection
    mean_s = per.mean / 1e6 if per.count else 0.0
    out = (
        f"{w.waiting:,} requests were still waiting at the end, {w.unsent:,} of them never "
        f"sent: the {connections:,} connection{'s' * (connections != 1)} (-c) limited the "
        "run, every one busy (one request at a time each)"
    )
    if mean_s > 0:
        out += (
            f": at {fmt_us(per.mean)} a request they carry about "
            f"{connections / mean_s:,.0f} req/s of the {rate:,.0f} asked"
        )
    need = math.ceil(rate * mean_s) if mean_s > 0 else 0
    more = f"-c {max(need, connections + 1):,} or more" if need else "more connections (-c)"
    return f"{out}; whether the server keeps up with {rate:,.0f} req/s needs {more}"
