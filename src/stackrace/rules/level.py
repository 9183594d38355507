"""How one level of one stack is judged: one state, from the level's own evidence.

    judgment = judge(Evidence(step, others=steps))     # the app, a replay, bench
    judgment.state, judgment.why, judgment.green        # "queueing", "500 wait ~5.7 s …", False
    verdict = breaking_point(steps)                    # the first level it broke at

A verdict is a judgment of the level itself, never only a comparison with the level
before: the same at c=500 whether the race started there or climbed there, on every
path (picker, `--go`, preset, ramp, replay, bench). A lower level, when there is one,
is extra evidence (a better estimate of how long the server takes to serve one
request), never the only one. The states, in their order of precedence:

  state           green  breaking point  what it means
  wedged          no     yes             clients wait and nothing came back for 5 s
  measuring       no     no              too little measured yet (a second, 20 requests)
  failing         no     yes             over 1 % of the requests failed (most, lately)
                                         with errors, refusals or resets
  starving        no     yes             some clients get nothing while others are served
                                         (unless its core was held by others)
  engine-limited  no     not judged      the engine, not the server, was the limit
  core-limited    no     not judged      it waited for a core other stacks or processes held
  failing         no     yes             over 1 % ran out of time (and no limit above)
  saturated       no     yes             requests queue behind its own full CPU
  queueing        no     yes             requests wait much longer than it takes to serve one
  slo-missed      no     no              none of the above, but the SLO is missed
  warming         no     no              keeping up while a JIT's req/s still climbs
  at full cpu     no     no              it keeps up, but its CPU is spent: no room for more
  keeping up      yes    no              every rule met

Failing by answers that are errors, refusals or resets comes first; starving next (an
engine slower than the server cannot leave one client seconds without an answer while
it reads another's thousands), unless the stack's core was held by others; failing by
timeouts alone comes after the engine's and a busy core's limits: a request that ran
out of time on a machine that starved the engine or the stack of CPU is not a verdict
on the server (the limit's state says what was seen: "· 1.1% failed (timed out)").

"measuring" gives way to failing (or queueing) as soon as their evidence is there: a
level where every request that ended lately timed out is failing at once, however
few ended (`recent`), and one where nothing came back at all while a client waited
the level out is judged.

**Queueing, from first principles.** A request waits about W = L / X (Little's law: L
the requests in flight on average over the level, X the requests that ended a second;
the mean latency when L was not sampled). The server takes about S to serve one: its
fastest answer, at this level or at any other level measured (the first answer of a
level started from idle is served at once; at a level climbed to, the queue is
already there, and a lower level's fastest answer is the better estimate). It queues
when W passes `QUEUE_FACTOR` × S and S + `QUEUE_FLOOR_US` (a wait a person notices
and a shared core's stalls do not make), or its tail does: p99, or the oldest request
still waiting, past `TAIL_FACTOR` × S and S + `TAIL_FLOOR_US`, or clients waited the
whole level with no answer. Never "req/s stopped growing": in a closed loop every
connection always has a request in flight, so "N waiting" at c=N proves nothing, and
req/s that stops growing is as often the engine's or a shared core's limit as the
server's. One gunicorn sync worker on a 10 ms wait serves ~90 req/s: at c=2 each waits
~20 ms (keeping up), at c=5 ~55 ms, five times its service time (queueing), at c=500
~5.6 s.

**The server is only blamed for what it did.** When the engine limited the figures
(rules/engine.py), the level is engine-limited; when the stack wanted its core and
waited for it while other stacks or processes held it (rules/cores.py), its figures
are a share of that core: core-limited, queue or not. Neither is a breaking point nor
a tick, and every summary says "not judged" with the figure that shows it. But a
busy core is not judged by its share only: a stack that spent a share f of its time
runnable without a core serves at most 1 − f of its speed, so its requests wait up to
1/(1 − f) as long (for one that wanted its core the whole time, 1 − f is the share g
of that time it got one); its waits are scaled by 1 − f (`cores.time_lost`) and a
queue still beyond the bounds by a margin (`own_margin`: none when nothing was lost,
`OWN_QUEUE_MARGIN` from 60 % lost) is its own: "▲ QUEUEING · 100 wait ~219 ms each
(~88 ms with a core to itself); one takes ~5.6 ms · its core was also busy: it ran 40%
of the time it wanted it". So is one its accept queue held (`held_at_the_door`: half
its clients or more waited there for a worker, every worker busy: the server's own
evidence), and such a line stays the server's when the engine limited the level too,
if it is past the bounds with the engine's whole delay added to every service cycle
(`_engine_spared`: the engine's limit is said beside it). A queue the share explains
is the core's (core-limited, not judged), whether or not the core was full enough to
call the level core-limited before: two stacks that waited alike get the same state,
and the scaling and its margin grow with the wait from nothing, so a few points more
wait for a core never flip the state. Only
answers that are errors, refused connections and resets are the server's whatever
the engine or the machine did: no starved engine answers 404.

**Goodput.** The req/s a judgment carries is `WindowStats.goodput`: answers that count
(2xx/3xx, or what a request expects), never HTTP errors. Those count as failures.

No I/O and no UI: every front end builds the evidence it has and shows the judgment.
Long because the states and their precedence are one decision, read top to bottom in
`judge`; cut in two, each half would need the other's order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from stackrace.engine.model import (
    CONNECT_TIMEOUT,
    DROPPED,
    HTTP_STATUS,
    INVALID_BODY,
    NOT_THE_SERVERS,
    REFUSED,
    RESET,
    TIMEOUT,
    WindowStats,
)
from stackrace.rules import cores
from stackrace.rules.breaking import LevelVerdict, StepResult, attempts
from stackrace.rules.engine import engine_delay_us

# --- the states -----------------------------------------------------------------------

MEASURING = "measuring"
WARMING = "warming"
KEEPING_UP = "keeping up"
QUEUEING = "queueing"
SATURATED = "saturated"
STARVING = "starving"
FAILING = "failing"
WEDGED = "wedged"
ENGINE_LIMITED = "engine-limited"
CORE_LIMITED = "core-limited"
SLO_MISSED = "slo-missed"
AT_FULL_CPU = "at full cpu"

STATES = (
    MEASURING,
    WARMING,
    KEEPING_UP,
    QUEUEING,
    SATURATED,
    STARVING,
    FAILING,
    WEDGED,
    ENGINE_LIMITED,
    CORE_LIMITED,
    SLO_MISSED,
    AT_FULL_CPU,
)
# the server's own: a breaking point
BROKEN = (WEDGED, FAILING, STARVING, SATURATED, QUEUEING)
# the figures were not the server's: no breaking point at that level, and not "kept up"
NOT_JUDGED = (ENGINE_LIMITED, CORE_LIMITED)
# how bad, for a display that changes at once toward worse and only after a while back
SEVERITY = {
    MEASURING: 0,
    KEEPING_UP: 1,
    WARMING: 1,
    SLO_MISSED: 2,
    AT_FULL_CPU: 2,
    ENGINE_LIMITED: 2,
    CORE_LIMITED: 2,
    QUEUEING: 3,
    SATURATED: 3,
    STARVING: 4,
    FAILING: 5,
    WEDGED: 6,
}
# as a room reads them (a pane's verdict line, a table's cell)
LABELS = {
    MEASURING: "measuring",
    WARMING: "warming up",
    KEEPING_UP: "keeping up",
    QUEUEING: "QUEUEING",
    SATURATED: "SATURATED",
    STARVING: "STARVING",
    FAILING: "FAILING",
    WEDGED: "WEDGED",
    ENGINE_LIMITED: "LIMITED BY THE ENGINE",
    CORE_LIMITED: "LIMITED BY A BUSY CORE",
    SLO_MISSED: "MISSES THE SLO",
    AT_FULL_CPU: "AT FULL CPU",
}
# levels it served without breaking (a summary's "no breaking point up to …")
KEPT = (KEEPING_UP, WARMING, SLO_MISSED, AT_FULL_CPU)

# --- the thresholds -------------------------------------------------------------------

FAILURE_RATIO = 0.01  # failing when more than 1 % of the attempts failed
RECENT_FAILED = 0.5  # ... or more than half of those that ended lately
RECENT_MIN = 5  # (at least this many ended lately)
QUEUE_FACTOR = 4.0  # queueing when requests wait this many service times ...
QUEUE_FLOOR_US = 20_000  # ... and this much longer than one takes
TAIL_FACTOR = 20.0  # or their tail (p99, the oldest waiting) this many ...
TAIL_FLOOR_US = 200_000  # ... and this much longer
OLDEST_FLOOR_US = 1_000_000  # the oldest waiting request: at least a second
TAIL_MIN_ANSWERS = 100  # a p99 of fewer answers is one request's luck
# a queue scaled by the share of a core the stack got is its own past this many times
# the bounds: the share is a median of samples and the service time a bound, so only a
# clear excess is named (a sync worker at c=100: ~88 ms against 26 ms)
OWN_QUEUE_MARGIN = 2.0
# ... reached in full when the core gave it 40 % of the time it wanted one or less, and
# from 1 (no margin: nothing was scaled) in proportion to the time it lost, so the state
# never flips on a small difference in its wait for a core (`own_margin`)
MARGIN_FULL_AT = 0.6
# the server's own evidence of a queue: its accept queue held this share of the clients
# (at least `HELD_MIN`): they waited for a worker to take them, every worker busy
HELD_SHARE = 0.5
HELD_MIN = 2
STARVED_SHARE = 0.05  # starving when one client in twenty gets nothing while others are served
WEDGED_AFTER = 5.0  # seconds with clients waiting and no answer at all: wedged
WARM_CLIMB = 0.05  # warming (not yet keeping up) while its req/s has climbed this much


def starves(w: WindowStats) -> bool:
    """Some clients starve while others are answered: more than `STARVED_SHARE` of the
    clients' time spent waiting far past the answered requests' p99 (engine/model.py
    `starved_share`: a worker that stays on one keep-alive connection, connections a
    busy server leaves unread)."""
    return w.requests > 0 and w.starved_share > STARVED_SHARE


# --- evidence and judgment ------------------------------------------------------------


@dataclass(frozen=True)
class Evidence:
    """What is known of one level: its figures (`step`: the level's running totals, the
    stack's CPU, its fastest answer, the engine's limit) and, live, a little more."""

    step: StepResult
    # the same stack's other levels measured (their fastest answers: the service time)
    others: Sequence[StepResult] = ()
    rate_mode: bool = False  # levels are req/s, not connections
    # the last seconds of the level (failing as soon as most of what ends fails)
    recent: WindowStats | None = None
    stalled_s: float = 0.0  # seconds with clients waiting and no answer at all
    stall_why: str = ""  # what the kernel, its log and its processes showed meanwhile
    warming: bool = False  # still climbing, by race/warmup.py's rule
    # how far its req/s has climbed since its first second: a JIT warming up, past
    # `WARM_CLIMB` (a CPython stack is "warming" a few seconds too, and climbs nothing)
    warm_climb: float | None = None
    slo_miss: str = ""  # the SLO's terms missed, with their figures ("" met or none)
    # live: the stack is sampled, but not yet at this level (its first second): its wait
    # for a core here is not known, so a queue a busy core could explain is not named yet
    cpu_pending: bool = False


@dataclass(frozen=True)
class Judgment:
    """One level's state and the figures that prove it, from one window."""

    level: int
    state: str
    why: str  # the figures that prove it, one line
    goodput: float  # answers that count, a second, over the judged window
    p99_us: int | None  # None: nothing answered
    failed: int  # failures the server answers for (abandoned excluded)
    failed_share: float = 0.0  # of the attempts (clients that got no answer in the level too)
    service_us: float | None = None  # how long it takes to serve one, estimated
    service_from: str = ""  # where that comes from ("its fastest answer at c=1")
    wait_us: float | None = None  # how long a request waits, Little's law
    tail_bound_us: float | None = None  # the p99 (and oldest wait) past which it queues

    @property
    def green(self) -> bool:
        """Every rule met: the only state a tick, "keeping up" or "holding" may show."""
        return self.state == KEEPING_UP

    @property
    def broken(self) -> bool:
        return self.state in BROKEN

    @property
    def not_judged(self) -> bool:
        return self.state in NOT_JUDGED

    @property
    def label(self) -> str:
        return LABELS[self.state]

    def verdict(self) -> LevelVerdict | None:
        """The breaking-point record of a broken level (None for any other state)."""
        if not self.broken:
            return None
        return LevelVerdict(self.level, self.state, self.why, self.p99_us or 0, self.goodput)


def level_text(level: int, rate_mode: bool) -> str:
    return f"{level:,} req/s" if rate_mode else f"c={level:,}"


def secs(us: float) -> str:
    """A wait as a person reads it: 850 µs, 19 ms, 5.7 s, 12 s."""
    if us < 1000:
        return f"{us:.0f} µs"
    if us < 1e6:
        return f"{us / 1000:.0f} ms" if us >= 10_000 else f"{us / 1000:.1f} ms"
    return f"{us / 1e6:.0f} s" if us >= 1e7 else f"{us / 1e6:.1f} s"


def fastest_us(step: StepResult) -> int | None:
    """The level's fastest answer: its first intervals' (warm-up included) or its
    totals' (None before any answer)."""
    own = step.window.latency.min if step.window.latency.count else None
    if step.fastest_us and (own is None or step.fastest_us < own):
        return step.fastest_us
    return own or None


def service_time(
    step: StepResult, others: Sequence[StepResult], rate_mode: bool = False
) -> tuple[float | None, str]:
    """How long the server takes to serve one request, and where that comes from: the
    fastest answer at this level or at any other measured (an upper bound of the
    service time, so a queue is never named on a guess that flatters it)."""
    best, where = fastest_us(step), "its fastest answer"
    for other in others:
        if other.level == step.level:
            continue
        f = fastest_us(other)
        if f is not None and (best is None or f < best):
            best = f
            where = f"its fastest answer, at {level_text(other.level, rate_mode)}"
    return (float(best), where) if best else (None, "")


def wait_us(w: WindowStats) -> float | None:
    """How long a request waits at this level (Little's law: in flight / ended a
    second, which counts the requests still waiting as much as the answered ones); the
    mean latency when in-flight was not sampled; None before anything is known."""
    ended = attempts(w)
    timed = w.span_seconds or w.seconds
    if w.in_flight > 0 and ended > 0 and timed > 0:
        return w.in_flight / (ended / timed) * 1e6
    if w.latency.count and w.latency.mean > 0:
        return float(w.latency.mean)
    if w.waiting and w.oldest_wait_us:
        return float(w.oldest_wait_us)  # nothing ended: at least this long
    return None


def queue_bounds(service: float) -> tuple[float, float]:
    """The wait and the tail past which a server with this service time queues."""
    return (
        max(QUEUE_FACTOR * service, service + QUEUE_FLOOR_US),
        max(TAIL_FACTOR * service, service + TAIL_FLOOR_US),
    )


def judge(e: Evidence) -> Judgment:
    """The level's state, from its evidence (see the module docstring)."""
    step = e.step
    w = step.window
    service, service_from = service_time(step, e.others, e.rate_mode)
    wait = wait_us(w)
    bound = tail = None
    if service is not None:
        bound, tail = queue_bounds(service)
    failed = step.errors
    share = failed / step.attempts if step.attempts else 0.0

    def judged(state: str, why: str) -> Judgment:
        return Judgment(
            level=step.level,
            state=state,
            why=why,
            goodput=w.goodput,
            p99_us=w.latency.p99 if w.latency.count else None,
            failed=failed,
            failed_share=share,
            service_us=service,
            service_from=service_from,
            wait_us=wait,
            tail_bound_us=tail,
        )

    if e.stalled_s >= WEDGED_AFTER:
        head = f"no answer for {e.stalled_s:.0f} s while {w.waiting:,} wait"
        return judged(WEDGED, f"{head} · {e.stall_why}" if e.stall_why else head)
    recent = _recent_failure(e.recent)
    if not step.enough and not recent:
        n = w.requests
        # timed as req/s is (`-n`: first send to last answer): one duration per report
        timed = w.span_seconds or w.seconds
        took = f"{timed:.2f}" if timed < 10 else f"{timed:.1f}"
        return judged(MEASURING, f"{n:,} answer{'s' if n != 1 else ''} in {took} s")
    failing = ""
    if step.enough and share > FAILURE_RATIO:
        failing = f"{100 * share:.1f}% failed ({failure_words(w)})"
    failing = failing or recent
    # answers that are errors, refusals and resets are the server's whatever else
    # happened; requests that only ran out of time may be a starved engine's or core's
    if failing and not _timed_out_only(e.recent if recent and not step.enough else w):
        return judged(FAILING, failing)
    queue = _queue_why(step, service, service_from, wait, bound, tail)
    # a stack that waited for a core: the queue it would have had with the core to
    # itself (its figures scaled by the time it lost), past `own_margin` × the bounds,
    # is its own whatever the core did; so is one its accept queue held (every worker
    # busy: the server's own evidence), whatever the share (see the module docstring)
    got = cores.time_lost(step)
    own = queue
    if queue and got is not None and got < 1.0:
        own = _queue_why(step, service, service_from, wait, bound, tail, got, own_margin(got))
    held = held_at_the_door(step) if queue else ""
    starving = starving_why(step) if starves(w) else ""
    core_limited = cores.core_limited(step)
    if starving and not core_limited:
        # an engine slower than the server cannot leave one client seconds without an
        # answer while it reads another's thousands: unfair service is the server's
        return judged(STARVING, starving)
    symptom = failing or starving or queue

    def queue_at(scaled: float, margin: float) -> str:
        return _queue_why(step, service, service_from, wait, bound, tail, scaled, margin)

    spared = _engine_spared(step, service, got, queue_at) if held else ""
    if step.engine_limit and not spared:
        return judged(ENGINE_LIMITED, " · ".join(x for x in (step.engine_limit, symptom) if x))
    if queue and e.cpu_pending and not failing and not held:
        # a level's first second, its CPU there not sampled yet: a queue past the
        # bounds by less than the most a busy core is held to (`OWN_QUEUE_MARGIN`)
        # could be the core's; one further past is the server's whatever the share
        clear = _queue_why(step, service, service_from, wait, bound, tail, 1.0, OWN_QUEUE_MARGIN)
        if not clear:
            return judged(MEASURING, f"{queue} · its CPU at this level not sampled yet")
    if core_limited and not ((own or held) and not failing):
        # its figures are a share of a core others held: no tick, no break
        return judged(CORE_LIMITED, " · ".join(x for x in (cores.core_share(step), symptom) if x))
    if failing:
        return judged(FAILING, failing)
    if queue:
        if cores.cpu_bound(step):
            cap = cores.capacity(step) / 100
            where = f"{cap:.0f} core" + ("s" if cap > 1 else "")
            return judged(SATURATED, f"CPU {step.cpu_percent or 0:.0f}% of {where} · {queue}")
        busy = cores.busy_too(step)
        if not own and not held:
            # the share of a core it got explains the whole queue: the core's, not judged
            why = f"{busy.replace(' also', '')} · {queue}" if busy else queue
            return judged(CORE_LIMITED, why)
        if not own:
            # its accept queue says so: the line at its door is there however fast the
            # core, and the wait it would have had with the core to itself is said
            # beside the one measured (what the core does not explain), even when that
            # is within the bounds: the line is the server's, its length partly the core's
            scaled = got if got is not None else 1.0
            own = _queue_why(step, service, service_from, wait, bound, tail, scaled, 0.0) or queue
        return judged(QUEUEING, " · ".join(x for x in (own, held, busy, spared) if x))
    if e.slo_miss:
        return judged(SLO_MISSED, e.slo_miss)
    calm = _calm_why(service, service_from, wait)
    if failed:  # under the threshold, but never "none": said first
        few = f"{failed:,} failed ({100 * share:.2g}%, under {100 * FAILURE_RATIO:g}%)"
        calm = f"{few} · {calm}" if calm else few
    if e.warming and e.warm_climb is not None and e.warm_climb > WARM_CLIMB:
        return judged(WARMING, f"req/s +{100 * e.warm_climb:.0f}% so far · {calm}")
    if cores.cpu_bound(step):
        # its answers are on time, but it has no CPU left for more: a tick here would
        # promise room it does not have (uvicorn at c=500 on the core it shares)
        cap = cores.capacity(step) / 100
        where = f"{cap:.0f} core" + ("s" if cap > 1 else "")
        spent = f"CPU {step.cpu_percent or 0:.0f}% of {where}: no room for more load"
        return judged(AT_FULL_CPU, f"{spent} · {calm}" if calm else spent)
    return judged(KEEPING_UP, calm)


def own_margin(got: float) -> float:
    """How far past the bounds a queue scaled by `got` (the factor `cores.time_lost`
    gives) must be to be called the server's own: 1 when nothing was lost, rising in
    proportion to the time lost to `OWN_QUEUE_MARGIN` at `MARGIN_FULL_AT` (the share
    and the service time are estimates: the more a wait is scaled, the clearer its
    excess must be). Continuous, so near-equal waits for a core read the same."""
    lost = min(1.0, max(0.0, 1.0 - got) / MARGIN_FULL_AT)
    return 1.0 + (OWN_QUEUE_MARGIN - 1.0) * lost


def _engine_spared(
    step: StepResult,
    service: float | None,
    got: float | None,
    queue_at: Callable[[float, float], str],
) -> str:
    """ "" unless the engine limited the level and the line at the server's door is
    the server's all the same: its accept queue held the clients (`held_at_the_door`)
    and their wait is past the bounds even with the engine's whole delay (its lag and
    its wait for a core per wake-up) added to every service cycle, the most a slow
    reader can stretch a worker's turn, and the core's share taken out as for any
    queue. A busy machine's engine then waited too, but not what the clients waited
    for (one sync worker at c=300 beside CI's other lanes: 4 ms per wake-up against
    ~1.8 s in the line, 299 of 300 clients in the accept queue)."""
    if not step.engine_limit or service is None or service <= 0:
        return ""
    spare = service / (service + engine_delay_us(step.window))
    share = (got if got is not None else 1.0) * spare
    if not queue_at(share, own_margin(share)):  # `_queue_why` at that share and margin
        return ""
    return f"{step.engine_limit}, not what the line waited for"


def held_at_the_door(step: StepResult) -> str:
    """ "" unless the server's own evidence says every worker was busy: its listening
    socket's accept queue (the kernel's) held `HELD_SHARE` of the clients or more. In a
    closed loop the clients beyond what the server takes at once wait there however fast
    its core is (one sync worker at c=100: ~98 of them), so such a queue is the server's
    even when a busy core slowed it too; a server that takes every connection at once
    and queues inside (gevent, an event loop) shows nothing here, and its queue is judged
    by its wait alone."""
    q = step.accept_queue
    if q is None or q < max(HELD_MIN, HELD_SHARE * step.clients):
        return ""
    return f"{q:,} of {step.clients:,} clients in its accept queue: every worker busy"


def _timed_out_only(w: WindowStats | None) -> bool:
    """Every failure a request that ran out of time (no answer, or due too long in rate
    mode): what an engine or a core starved of CPU can cause too."""
    if w is None:
        return False
    kinds = {k for k, n in w.failures.items() if n and k not in NOT_THE_SERVERS}
    return bool(kinds) and kinds <= {TIMEOUT, DROPPED}


def _recent_failure(recent: WindowStats | None) -> str:
    """Most of what ended lately failed: the proof, or ""."""
    if recent is None:
        return ""
    ended = attempts(recent)
    bad = sum(n for k, n in recent.failures.items() if k not in NOT_THE_SERVERS)
    if ended < RECENT_MIN or bad <= RECENT_FAILED * ended:
        return ""
    return f"{bad:,} of the last {ended:,} failed ({failure_words(recent)})"


def _queue_why(
    step: StepResult,
    service: float | None,
    service_from: str,
    wait: float | None,
    bound: float | None,
    tail: float | None,
    share: float = 1.0,
    margin: float = 1.0,
) -> str:
    """Why the level queues ("" when it does not), with the service time it is weighed
    against and where that comes from. `share` < 1: the share of the time it wanted a
    core that it got one; its waits are scaled by it (the wait it would have had with
    the core to itself) and must pass `margin` × the bounds, and requests left with no
    answer (the busy core's as much as its own) do not count."""
    w = step.window
    stale = ""
    if (
        share >= 1 - cores.SHARE_WAIT
        and step.attempts
        and step.stale / step.attempts > FAILURE_RATIO
    ):
        stale = f"{step.stale:,} got no answer in the level's {w.seconds:.0f} s"
    if service is None or bound is None or tail is None:
        return stale
    one = f"one takes ~{secs(service)} ({service_from})"

    def beyond(us: float, limit: float) -> bool:
        return us * share > limit * margin

    def alone(us: float) -> str:
        # a wait scaled by less than the core's noise is said as it was measured
        near = share >= 1 - cores.SHARE_WAIT
        return f" (~{secs(us * share)} with a core to itself)" if not near else ""

    if wait is not None and beyond(wait, bound):
        return f"{_waiters(w)} ~{secs(wait)} each{alone(wait)}; {one}"
    if w.latency.count >= TAIL_MIN_ANSWERS and beyond(w.latency.p99, tail):
        return f"p99 {secs(w.latency.p99)}{alone(w.latency.p99)}; {one}"
    if w.waiting and beyond(w.oldest_wait_us, max(tail, OLDEST_FLOOR_US)):
        return f"a request has waited {secs(w.oldest_wait_us)}{alone(w.oldest_wait_us)}; {one}"
    return stale


def _waiters(w: WindowStats) -> str:
    n = max(w.waiting, round(w.in_flight))
    return f"{n:,} wait" if n != 1 else "1 waits"


def _calm_why(service: float | None, service_from: str, wait: float | None) -> str:
    if service is None or wait is None:
        return ""
    return f"a request waits ~{secs(wait)}; one takes ~{secs(service)} ({service_from})"


def failure_words(w: WindowStats) -> str:
    """The dominant failure kind in words ("timed out", "HTTP 404")."""
    kinds = [(n, k) for k, n in w.failures.items() if k not in NOT_THE_SERVERS and n > 0]
    if not kinds:
        return "no answer in the level"
    _n, kind = max(kinds)
    if kind == HTTP_STATUS:
        codes = ", ".join(str(c) for c in sorted(w.status) if c >= 400)
        return f"HTTP {codes}" if codes else "HTTP errors"
    return {
        TIMEOUT: "timed out",
        REFUSED: "refused",
        RESET: "reset",
        CONNECT_TIMEOUT: "connect timed out",
        INVALID_BODY: "wrong body",
        DROPPED: "dropped: due longer than the timeout",
    }.get(kind, kind.replace("_", " "))


def starving_why(step: StepResult) -> str:
    w = step.window
    return (
        f"{100 * w.starved_share:.0f}% of {step.clients:,} clients' time: no answer "
        f"for up to {secs(w.starved_wait_us)}, the others' p99 {secs(step.p99_us)}"
    )


# --- a series of levels ---------------------------------------------------------------


def judge_steps(steps: Sequence[StepResult], rate_mode: bool = False) -> list[Judgment]:
    """Each level measured long enough, judged on its own figures (ascending); the
    service time from every level's fastest answer."""
    done = sorted((s for s in steps if s.enough), key=lambda s: s.level)
    return [judge(Evidence(s, others=done, rate_mode=rate_mode)) for s in done]


def breaking_point(steps: Sequence[StepResult], rate_mode: bool = False) -> LevelVerdict | None:
    """The first level (ascending) where the stack itself broke; levels the engine or
    a busy core limited are passed over (not judged), never taken for it."""
    for j in judge_steps(steps, rate_mode):
        if j.broken:
            return j.verdict()
    return None
