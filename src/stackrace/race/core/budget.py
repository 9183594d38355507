"""A request budget (as ab -n): exactly N requests, and the wait until each one ended.

    await drain(core, ids, timeout, wait)          # stop sending; nothing left in flight
    await core.set_budget(n, ids)                   # (or TargetSpec.budget, from the start)
    ok = await spent(core, ids, n, timeout, wait)   # every one answered or failed

Bench's `--requests` (a level of N requests, race/bench/protocol.py) and `load -n`
(race/load/driver.py) wait for a budget the same way: until every member has ended N
requests (answered or failed) with none still waiting. A request ends within the
request timeout, so the wait ends; a stall longer than that (nothing answered, nothing
failed) ends it too, with the rest counted still waiting, never waited for forever.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from stackrace.race.core.core import RaceCore

# past the request timeout, this much longer with nothing ended: the budget's wait ends
STALL_GRACE_S = 2.0


async def drain(
    core: RaceCore, ids: Sequence[str], timeout: float, wait: Callable[[], Awaitable[object]]
) -> None:
    """Stop sending and wait (interval by interval: `wait`) until nothing is in flight,
    at most the request timeout."""
    await core.set_budget(0, ids)
    end = core.clock() + timeout + 1.0
    while core.clock() < end:
        await wait()
        if all((t := core.target(i)) is None or t.interval.waiting == 0 for i in ids):
            return


async def spent(
    core: RaceCore,
    ids: Sequence[str],
    n: int,
    timeout: float,
    wait: Callable[[], Awaitable[object]],
    stop: Callable[[], bool] = lambda: False,
) -> bool:
    """Wait until each member ended `n` requests of its totals (answered or failed) and
    none is waiting. False when nothing ended for longer than the request timeout (and
    `STALL_GRACE_S`); True too when `stop()` says to end early (a member crashed, the
    user stopped the load)."""
    last_progress = core.clock()
    done_before = -1
    # figures from before the budget (a warm-up's totals, drained: nothing waiting) must
    # not read as the budget spent: only a snapshot published since counts
    begun = core.engine.latest.seq if core.engine.latest is not None else -1
    while True:
        await wait()
        latest = core.engine.latest
        if latest is not None and latest.seq != begun:
            snaps = [core.target(i) for i in ids]
            if all(t is None or (t.total.attempts >= n and t.total.waiting == 0) for t in snaps):
                return True
            done = sum(t.total.attempts for t in snaps if t is not None)
            if done != done_before:
                done_before, last_progress = done, core.clock()
        if core.clock() - last_progress > timeout + STALL_GRACE_S:
            return False
        if stop():
            return True
