"""Checks that a window's figures add up (Little's law).

Pure functions of a `WindowStats` (and what was asked of the engine), shared by the
app's panes and every bench report, so both flag the same things the same way. Whether
the engine limited the figures is a judgment: stackrace.rules.engine.

- **Little's law** (L = λW): the engine samples how many requests are in flight every
  50 ms; their time-average is L, measured. The answers explain λW = req/s × mean
  latency of them. A closed loop of C connections keeps L ≈ C. Two ways a window does
  not add up, each flagged with its reason:
    * λW far below L: the answers describe only some of the clients; the others waited
      without an answer in the window (a queue still growing: the classic way a load
      tester flatters a server that stopped answering). The waiting count says how many;
    * L far below C: connections sat idle instead of carrying requests (they spent the
      window failing to connect, the engine could not keep up, or a budget ran out).
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

from stackrace.engine.model import ABANDONED, NOT_THE_SERVERS, RESPONSE_FAILURES, WindowStats
from stackrace.rules.engine import ENGINE_LIMITED, engine_share
from stackrace.settings.units import fmt_us

# λW within this factor of L (and L of C), or the window is flagged. Generous: a window
# of a few seconds at high latency has edge effects (requests that straddle its ends).
LITTLE_LOW = 0.8
LITTLE_HIGH = 1.25


@dataclass(frozen=True)
class LittleCheck:
    """C connections asked; L requests in flight on average; λW explained by answers."""

    connections: int
    in_flight: float  # L, measured
    explained: float  # λW = req/s × mean latency
    ok: bool
    reason: str = ""

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
        n
        for k, n in window.failures.items()
        if k not in RESPONSE_FAILURES and k not in NOT_THE_SERVERS
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
