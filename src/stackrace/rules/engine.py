"""Whether the engine, not the server, limited a window's figures, and by how much.

A load tester that cannot keep up reports its own limit as the server's: responses sit
unread while it is busy or waiting for a core, so latencies grow and req/s stops
growing. Two ways the engine limits a window, each from what it measured of itself:

- **its delay is a share of the latency**: its event loop's lag (sampled every 5 ms)
  plus how long each of its wake-ups waited for a core (run-queue time per wake-up,
  from the kernel) is `ENGINE_LIMITED` or more of the mean latency it measured: the
  latency is partly its own;
- **it wanted a core it did not get, or used all of it**: it ran near 100 % of its core
  (saturated), or it waited for a core `ENGINE_STARVED` % of the window or more while
  it was busy (running or waiting to run) `ENGINE_BUSY` of the time or more: its
  throughput is what its share of a core allows (Go net/http at c=1,000 beside a busy
  loop on the engine's core: the engine ran 16 %, waited 52 %; Go used 19 % of its
  core, and 1,000 requests waited ~97 ms each for an engine that could not read
  them). An engine that waited for a core now and then while it mostly slept (a sync
  worker's engine at 88 req/s: 4 % CPU, a few % waiting) limits nothing: the wait a
  request sees there, seconds, is the server's.

HTTP/2's framing (libnghttp2, engine/_h2.h) runs in the engine's own process, so its
cost is in these same measures: the engine's CPU, its loop's lag (a read carrying many
streams' answers is one long turn, which the 5 ms lag timer waits out) and its waits
for a core. What HTTP/2 adds is said: a limit names the engine's CPU per answer, the
cost of an answer with its framing, to read beside the server's.

Apart from the level's judgment (rules/level.py), which weighs this limit against the
other evidence; shared with every bench report and `load`, so each says the same.
"""

from __future__ import annotations

from stackrace.engine.model import WindowStats

# The engine's delay above this share of the mean latency: engine-limited.
ENGINE_LIMITED = 0.2
# The engine waiting for a CPU this percent of the window or more ...
ENGINE_STARVED = 20.0
# ... while it was busy (running or waiting to run) this share of the time: limited.
ENGINE_BUSY = 0.5
# Below this much delay the engine is never the story (a loop turn costs a few µs).
ENGINE_LAG_FLOOR_US = 200


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


def engine_limited(window: WindowStats, saturated: bool = False, procs: int = 1) -> bool:
    return bool(engine_limit(window, saturated, procs))


def cpu_per_answer_us(window: WindowStats) -> float:
    """The engine's CPU per answer, µs (0: nothing answered): HTTP/2's framing included."""
    if not window.requests or window.seconds <= 0:
        return 0.0
    return window.engine_cpu / 100 * window.seconds * 1e6 / window.requests


def engine_limit(window: WindowStats, saturated: bool = False, procs: int = 1) -> str:
    """Why the engine limited this window's figures, and by how much ("" if it did not);
    `procs`: the engine processes that carried the window (each has a core to want)."""
    why = _engine_limit(window, saturated, procs)
    if why and window.http == "2" and window.requests:
        per = cpu_per_answer_us(window)
        why += f"; HTTP/2, {per:.1f}µs of engine CPU per answer, framing included"
    return why


def _engine_limit(window: WindowStats, saturated: bool, procs: int) -> str:
    if saturated:
        # per engine process, a share of its core (summed over processes, or read a tick
        # late, it can say "112 % of its core")
        busy = min(100.0, window.engine_cpu / max(1, procs))
        return f"engine saturated ({busy:.0f}% of its core)"
    wanted = window.engine_cpu + window.engine_wait
    if window.engine_wait >= ENGINE_STARVED and wanted >= ENGINE_BUSY * 100 * max(1, procs):
        # per engine process, a share of its time (summed over processes it reads
        # "waited 140 %", no share of anything)
        waited = min(100.0, window.engine_wait / max(1, procs))
        return (
            f"its engine waited for a core {waited:.0f}% of the time "
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
