"""Why a stack broke: one cause named from an evidence window, in words a room reads.

`name_cause(window)` is pure (no I/O): the live app, bench, a replay and a report name
the same cause from the same window. It picks one `CauseKind` of the documented set
(docs/verdicts.md, "Why it broke"), and says it with the figure and the app's own
function that prove it, the knob it implies (`advice`), and when the evidence is thin
(`confidence`). The rules, first match wins, deeper causes before their symptoms:

1. **worker restarts**: workers exited and were replaced during the window (gunicorn's
   WORKER TIMEOUT kills them mid-request): whatever they were doing, they were cut off.
2. With the workers' stacks sampled (shares of the sampled threads' samples):
   - **gc**: ≥ 20 % of samples collecting garbage;
   - **event loop blocked**: the threads run an event loop and ≥ 30 % of samples are
     blocked in a call (a synchronous call inside async code holds every request);
   - **db pool** / **lock**: ≥ 30 % waiting on a lock; a pool's when most of those
     waits are inside a pool's code or the database connections in use reached the
     app's pool;
   - **gil**: ≥ 20 % waiting for the GIL, with more than one thread;
   - **cpu**: ≥ 50 % on CPU; neither gil nor cpu when the kernel's CPU time
     contradicts the samples' (a quarter of what the threads sampled running would
     use, or less): then the kernel's side names it, as in 3. When the processes
     waited for a core longer than they ran, the sentence says its samples are running
     or waiting (the kernel reads both as running) and the knob is the core;
   - **accept queue**: the listening socket's queue reached its limit (or the machine
     dropped connections while it was near it);
   - **blocking wait**: ≥ 35 % blocked in a call (a socket, a file, a sleep).
3. Not sampled (a Go, Node, PHP or nginx server; py-spy not allowed): from the kernel:
   **cpu** when the processes used, or waited for, most of their cores (or one used a
   whole core, or their threads waited half a core's time for one); **accept
   queue** as above; **blocking wait** when ≥ 35 % of thread reads sleep in a sleep or
   I/O call.
4. Otherwise **unknown**, with what was seen.

Names (functions, files) are data: the sinks escape them.
"""

from __future__ import annotations

from stackrace.evidence.kernel import IO, SLEEPS
from stackrace.evidence.model import (
    Cause,
    CauseKind,
    EvidenceWindow,
    FrameShare,
    QueueEvidence,
    ThreadState,
)

MIN_SAMPLES = 30  # fewer thread samples: said in `confidence` (a share ±9 points)
GC_SHARE = 0.20
LOOP_SHARE = 0.30
LOCK_SHARE = 0.30
GIL_SHARE = 0.20
CPU_SHARE = 0.50
BLOCKED_SHARE = 0.35
CPU_CORES = 0.75  # kernel only: used or waited for this share of the cores
STARVED = 0.5  # kernel only: core-seconds a second its threads waited for a core

ADVICE = {
    CauseKind.BLOCKING_WAIT: "more threads or workers, or an async server: they wait, not work",
    CauseKind.CPU: "more worker processes (one per core), or less work per request",
    CauseKind.GIL: "processes, not threads: the threads share one GIL",
    CauseKind.LOCK: "fix the lock: hold it for less, never across a wait",
    CauseKind.DB_POOL: "a larger database pool, or no more threads than connections",
    CauseKind.ACCEPT_QUEUE: "a larger backlog, or more workers to accept",
    CauseKind.LOOP_BLOCKED: "move the call off the event loop (an executor or an async client)",
    CauseKind.GC: "fewer long-lived objects in cycles (gc.freeze, a higher threshold)",
    CauseKind.WORKER_RESTARTS: "a longer worker timeout, or a shorter call",
    CauseKind.UNKNOWN: "",
}
# the cpu cause of a stack that waited for a core longer than it ran: the samples' "on
# CPU" cannot tell running from waiting for a core (the kernel reads both as running),
# so the function they name may only have been waiting (a sync worker's sleep line, seen
# beside four other stacks on one core), and less work per request is not the knob
CORE_ADVICE = "a core of its own (fewer stacks per core), or a quieter machine"


def _pct(share: float) -> str:
    return f"{100 * share:.0f} %"


def _top(window: EvidenceWindow, *states: ThreadState) -> FrameShare | None:
    """The app's function with most samples in one of `states`."""
    found = [f for f in window.frames if f.state in states]
    return max(found, key=lambda f: f.samples) if found else None


def _top_except(
    window: EvidenceWindow, state: ThreadState, waiters: FrameShare | None
) -> FrameShare | None:
    """The top function in `state` not at the waiters' own line."""
    found = [
        f
        for f in window.frames
        if f.state is state
        and (
            waiters is None
            or (f.function, f.file, f.line) != (waiters.function, waiters.file, waiters.line)
        )
    ]
    return max(found, key=lambda f: f.samples) if found else None


def _top_wait(window: EvidenceWindow, state: ThreadState) -> FrameShare | None:
    found = [f for f in window.waits if f.state is state]
    return max(found, key=lambda f: f.samples) if found else None


def _in(f: FrameShare | None) -> str:
    return f" in {f.where()}" if f is not None else ""


def _queue_full(q: QueueEvidence | None) -> bool:
    if q is None or not q.limit:
        return False
    return q.depth_max >= q.limit or (q.overflows > 0 and q.depth_max >= 0.8 * q.limit)


def _queue_clause(q: QueueEvidence | None) -> str:
    if q is None or q.depth_max < 2:
        return ""
    limit = f" (limit {q.limit:,})" if q.limit else ""
    return f"; {q.depth_max:,} connections in the accept queue{limit}"


def _who(window: EvidenceWindow, workers: int | None, threads: int | None) -> str:
    """ "1 worker", "4 workers", "1 worker × 8 threads" """
    w = workers if workers is not None else max(1, window.workers)
    t = threads if threads is not None else max(1, round(window.threads / max(1, w)))
    noun = "worker" if w == 1 else "workers"
    return f"{w} {noun}" if t <= 1 else f"{w} {noun} × {t} threads"


def _busiest(window: EvidenceWindow) -> float:
    return max((p.cpu_share for p in window.processes), default=0.0)


def _waited_more_than_ran(window: EvidenceWindow) -> bool:
    """Its processes stood runnable without a core longer than they ran (and a tenth of
    a core or more): whatever the samples call on CPU was half waiting or more."""
    waited = sum(p.core_wait_share for p in window.processes)
    return waited >= 0.1 and waited > window.cpu()


def _cpu_sentence(window: EvidenceWindow, top: FrameShare | None) -> str:
    on_cpu = f"{_pct(window.share(ThreadState.ON_CPU))} of samples"
    running = window.states.get(ThreadState.ON_CPU.value, 0)
    if top is not None and window.threads > 1 and running:
        # of many threads most wait: which function holds the CPU is the point
        on_cpu = f"{top.where()} {_pct(min(1.0, top.samples / running))} of the samples on CPU"
    elif top is not None:
        on_cpu = f"{top.where()} {_pct(top.share)} of samples"
    if _waited_more_than_ran(window):
        on_cpu += ", running or waiting for a core (they waited longer than they ran)"
    if window.workers <= 1:
        head = f"the process is on CPU {_pct(min(1.0, _busiest(window)))}"
        waited = max((p.core_wait_share for p in window.processes), default=0.0)
        if waited >= 0.1:  # starved by other processes: it would have run more
            head += f" and waited for a core {_pct(min(1.0, waited))}"
    else:
        head = f"{window.workers} workers on CPU, {window.cpu():.1f} cores"
    out = f"{head}: {on_cpu}"
    gil = round(window.mean_threads(ThreadState.GIL_WAIT))
    if gil >= 1:
        out += f"; {gil} thread{'s' if gil > 1 else ''} wait for the GIL"
    return out


def _confidence(window: EvidenceWindow, share: float | None) -> str:
    notes = []
    if not window.sampled:
        why = window.not_sampled or "the stacks were not sampled"
        notes.append(f"named from the kernel's side only: {why}")
    elif window.samples < MIN_SAMPLES:
        notes.append(f"only {window.samples} thread samples")
    if share is not None and share < 0.5:
        notes.append(f"the evidence is mixed (the cause holds {_pct(share)} of samples)")
    return "; ".join(notes)


def _cause(
    window: EvidenceWindow,
    kind: CauseKind,
    sentence: str,
    function: FrameShare | None,
    share: float | None,
) -> Cause:
    starved = kind is CauseKind.CPU and _waited_more_than_ran(window)
    return Cause(
        kind=kind,
        sentence=sentence,
        function=function,
        advice=CORE_ADVICE if starved else ADVICE[kind],
        confidence=_confidence(window, share),
    )


def name_cause(
    window: EvidenceWindow, *, workers: int | None = None, threads: int | None = None
) -> Cause:
    """The one cause of `window` (the module docstring gives the rules). `workers` and
    `threads`: what the stack is configured with, where known (said in the sentence)."""
    if window.restarts >= 1:
        return _restarts(window)
    if window.sampled and window.samples > 0:
        cause = _from_samples(window, workers, threads)
        if cause is not None:
            return cause
    if not window.sampled or window.samples <= 0 or _cpu_contradicted(window):
        cause = _from_kernel(window)
        if cause is not None:
            return cause
    return _unknown(window)


def _cpu_contradicted(window: EvidenceWindow) -> bool:
    """The samples say threads ran, the kernel says the processes hardly did: under
    pyuwsgi py-spy read every sample "on CPU" while the kernel counted 0.0 cores, and
    "2 workers on CPU, 0.0 cores" contradicts its own figure. The kernel's CPU time is
    the measurement; the samples' running flag is then not used (cpu and gil)."""
    running = window.mean_threads(ThreadState.ON_CPU)
    used = window.cpu() + sum(p.core_wait_share for p in window.processes)
    return bool(window.processes) and running >= 0.5 and used < 0.25 * running


def _restarts(window: EvidenceWindow) -> Cause:
    n = window.restarts
    top = _top(window, ThreadState.BLOCKED, ThreadState.ON_CPU, ThreadState.LOCK_WAIT)
    sentence = f"{n} worker{'s' if n > 1 else ''} killed and restarted in {window.seconds:.0f} s"
    if top is not None:
        doing = "asleep" if top.state is ThreadState.BLOCKED else top.state.value
        sentence += f"; they were {doing} in {top.where()} {_pct(top.share)} of samples"
    return _cause(window, CauseKind.WORKER_RESTARTS, sentence, top, None)


def _from_samples(window: EvidenceWindow, workers: int | None, threads: int | None) -> Cause | None:
    share = window.share
    n = threads * (workers or 1) if threads is not None else window.threads
    q = window.queue
    if share(ThreadState.GC) >= GC_SHARE:
        top = _top(window, ThreadState.GC)
        sentence = f"{_pct(share(ThreadState.GC))} of samples collecting garbage{_in(top)}"
        return _cause(window, CauseKind.GC, sentence, top, share(ThreadState.GC))
    if window.event_loop and share(ThreadState.BLOCKED) >= LOOP_SHARE:
        top = _top(window, ThreadState.BLOCKED)
        sentence = (
            f"the event loop is blocked {_pct(share(ThreadState.BLOCKED))} of samples in a "
            f"synchronous call{_in(top)}{_queue_clause(q)}"
        )
        return _cause(window, CauseKind.LOOP_BLOCKED, sentence, top, share(ThreadState.BLOCKED))
    if share(ThreadState.LOCK_WAIT) >= LOCK_SHARE:
        return _lock(window, n)
    if _cpu_contradicted(window):
        pass  # neither gil nor cpu on samples the kernel's CPU time contradicts
    elif window.threads > 1 and share(ThreadState.GIL_WAIT) >= GIL_SHARE:
        top = _top(window, ThreadState.ON_CPU, ThreadState.GIL_WAIT)
        sentence = _cpu_sentence(window, _top(window, ThreadState.ON_CPU) or top)
        busy = share(ThreadState.GIL_WAIT) + share(ThreadState.ON_CPU)
        return _cause(window, CauseKind.GIL, sentence, top, busy)
    elif share(ThreadState.ON_CPU) >= CPU_SHARE:
        top = _top(window, ThreadState.ON_CPU)
        sentence = _cpu_sentence(window, top) + _queue_clause(q)
        return _cause(window, CauseKind.CPU, sentence, top, share(ThreadState.ON_CPU))
    blocked = _top(window, ThreadState.BLOCKED)
    if _queue_full(q) and q is not None:
        sentence = f"the accept queue is full: {q.depth_max:,} of {q.limit:,} waiting"
        if q.overflows:
            sentence += f", {q.overflows:,} connections dropped on this machine"
        if blocked is not None:
            sentence += (
                f"; {_who(window, workers, threads)} asleep in {blocked.where()} "
                f"{_pct(share(ThreadState.BLOCKED))} of samples"
            )
        return _cause(window, CauseKind.ACCEPT_QUEUE, sentence, blocked, None)
    if share(ThreadState.BLOCKED) >= BLOCKED_SHARE:
        sentence = (
            f"{_who(window, workers, threads)}: {_pct(share(ThreadState.BLOCKED))} of samples "
            f"asleep{_in(blocked)}{_queue_clause(q)}"
        )
        return _cause(
            window, CauseKind.BLOCKING_WAIT, sentence, blocked, share(ThreadState.BLOCKED)
        )
    return None


def _lock(window: EvidenceWindow, n: int) -> Cause:
    waiting = window.share(ThreadState.LOCK_WAIT)
    k = max(1, round(window.mean_threads(ThreadState.LOCK_WAIT)))
    top = _top(window, ThreadState.LOCK_WAIT)
    lock_samples = window.states.get(ThreadState.LOCK_WAIT.value, 0)
    pool = window.pool_waits * 2 >= lock_samples or (
        window.db_pool is not None
        and window.db_connections is not None
        and window.db_connections >= window.db_pool
    )
    if pool:
        sentence = f"{k} of {n} threads wait for a database connection{_in(top)}"
        if window.db_pool is not None:
            sentence += f"; the pool holds {window.db_pool}"
            if window.db_connections is not None:
                sentence += f" ({window.db_connections} in use)"
        return _cause(window, CauseKind.DB_POOL, sentence, top, waiting)
    sentence = f"{k} of {n} threads wait on a lock{_in(top)}"
    site = _top_wait(window, ThreadState.LOCK_WAIT)
    if site is not None and (top is None or site.function != top.function):
        sentence += f", at {site.where()},"
    # the holder is elsewhere than the waiters: a sample at the waiters' own line in
    # another state is a waiter caught as it got the lock or gave it back
    holder = _top_except(window, ThreadState.BLOCKED, top)
    running = _top_except(window, ThreadState.ON_CPU, top)
    if holder is not None and window.share(ThreadState.BLOCKED) * n >= 0.3:
        sentence += f" while its holder sleeps{_elsewhere(holder, top)}"
    elif running is not None:
        sentence += f" while its holder runs{_elsewhere(running, top)}"
    return _cause(window, CauseKind.LOCK, sentence.rstrip(","), top, waiting)


def _elsewhere(f: FrameShare, top: FrameShare | None) -> str:
    """Where the lock's holder is: its line when it is the waiters' function too."""
    if top is not None and (f.function, f.file) == (top.function, top.file):
        return f" at line {f.line}" if f.line != top.line else ""
    return f" in {f.where()}"


def _from_kernel(window: EvidenceWindow) -> Cause | None:
    cores = window.cores or 1
    used = window.cpu()
    waited = sum(p.core_wait_share for p in window.processes)
    q = window.queue
    busiest = max(window.processes, key=lambda p: p.cpu_share, default=None)
    # CPU-bound: it used, or waited on a run queue for, most of its cores, or one
    # process was on a core or runnable without one nearly all the time (it never slept:
    # a Go server with GOMAXPROCS=1 beside a busy machine used 0.64 of a core and waited
    # 0.49 more), or its threads stood runnable half the time without one
    if busiest is not None and (
        used + waited >= CPU_CORES * cores
        or busiest.cpu_share + busiest.core_wait_share >= 0.9
        or waited >= STARVED
    ):
        sentence = f"{busiest.name or 'the server'} is on CPU {used:.1f} of {cores} cores"
        if waited >= 0.1:
            sentence += f" and waited {waited:.1f} more for one"
        sentence += _queue_clause(q)
        return _cause(window, CauseKind.CPU, sentence, None, None)
    if _queue_full(q) and q is not None:
        sentence = f"the accept queue is full: {q.depth_max:,} of {q.limit:,} waiting"
        return _cause(window, CauseKind.ACCEPT_QUEUE, sentence, None, None)
    blocked = window.kernel_share(ThreadState.BLOCKED)
    if blocked >= BLOCKED_SHARE:
        calls = ", ".join(sorted({p.syscall for p in window.processes if p.syscall in SLEEPS | IO}))
        sentence = f"{_pct(blocked)} of thread reads asleep in a call"
        if calls:
            sentence += f" ({calls})"
        sentence += _queue_clause(q)
        return _cause(window, CauseKind.BLOCKING_WAIT, sentence, None, blocked)
    return None


def _unknown(window: EvidenceWindow) -> Cause:
    if window.sampled and window.samples and _cpu_contradicted(window):
        # what was seen is the kernel's figure: repeating "on CPU 100 %" over a pane that
        # reads CPU 7 % (uWSGI) would say the opposite of the measurement
        on_cpu = _pct(window.share(ThreadState.ON_CPU))
        seen = (
            f"CPU {window.cpu():.1f} cores (the samples' on CPU {on_cpu} is not used:"
            " the kernel's CPU time contradicts it)"
        )
    elif window.sampled and window.samples:
        seen = ", ".join(
            f"{state} {_pct(n / window.samples)}"
            for state, n in sorted(window.states.items(), key=lambda kv: -kv[1])[:4]
        )
    else:
        seen = f"CPU {window.cpu():.1f} cores"
    return _cause(window, CauseKind.UNKNOWN, f"no single cause: {seen}", None, None)
