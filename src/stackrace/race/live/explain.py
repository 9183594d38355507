"""Plain-language lines for a pane: the figure that proves a verdict, and what it means.

A verdict kind alone ("queueing") does not tell a room why; the figure beside it does,
and a sentence in words a non-specialist reads ("≈ 990 requests queued, each waits
~20 s") tells what it means. Both are computed here from the level's measured figures,
never from the UI, so every front end (the app, a replay, a summary export) says the
same thing:

- `proof(verdict, step)`: the figure that proves the verdict, at the level it was
  measured: queueing → how many wait and the req/s that stayed flat; saturated → the
  CPU against what the stack can use and the flat req/s; failing → the share that
  failed and the dominant kind; starving → how many clients got nothing, for how long,
  while the others were answered in what time.
- `annotate(...)`: at most one sentence, only when it matters: requests queued and their
  wait, a CPU-bound stack's ceiling, the kind of failure, a rate the stack cannot keep
  up with, a JIT warming up, an engine that limits the figures. Nothing when healthy.
"""

from __future__ import annotations

from stackrace.engine.model import (
    ABANDONED,
    CONNECT_TIMEOUT,
    DROPPED,
    HANDSHAKE_TIMED_OUT,
    HTTP_STATUS,
    INVALID_BODY,
    REFUSED,
    RESET,
    TIMEOUT,
    WindowStats,
)
from stackrace.rules.breaking import (
    FAILING,
    QUEUEING,
    SATURATED,
    STARVING,
    LevelVerdict,
    StepResult,
)
from stackrace.settings.units import fmt_us

# a stack is "behind schedule" when it delivers less than this share of the asked rate
BEHIND = 0.95
# a queue worth a sentence: this many clients waiting, each for this long (Little's law)
QUEUE_MIN = 10
QUEUE_WAIT_US = 250_000


def _n(x: float) -> str:
    return f"{x:,.0f}"


def _secs(us: float) -> str:
    if us < 1e6:
        return f"{us / 1000:.0f} ms" if us >= 10_000 else fmt_us(int(us))
    return f"{us / 1e6:.0f} s" if us >= 1e7 else f"{us / 1e6:.1f} s"


def dominant_failure(window: WindowStats) -> tuple[str, int]:
    """The failure kind with the most counts (abandoned left out), and its count."""
    kinds = [(n, k) for k, n in window.failures.items() if k != ABANDONED and n > 0]
    if not kinds:
        return "", 0
    n, k = max(kinds)
    return k, n


def proof(v: LevelVerdict, step: StepResult | None) -> str:
    """The figure that proves verdict `v`, measured at its level (`step`)."""
    if step is None:
        return v.reason
    w = step.window
    if v.kind == FAILING:
        kind, _ = dominant_failure(w)
        what = {HTTP_STATUS: "HTTP errors", TIMEOUT: "timed out", REFUSED: "refused"}.get(
            kind, kind.replace("_", " ")
        )
        errors = step.failed - step.stale
        share = 100 * errors / step.attempts if step.attempts else 0.0
        return f"{share:.1f}% failed ({what})"
    if v.kind == STARVING:
        return (
            f"{100 * w.starved_share:.0f}% of {step.clients:,} clients' time: no answer "
            f"for up to {_secs(w.starved_wait_us)}, the others' p99 {_secs(step.p99_us)}"
        )
    if v.kind == SATURATED:
        cap = (step.cpu_capacity or 100.0) / 100
        cores = f"{cap:.0f} core" + ("s" if cap > 1 else "")
        # the CPU the stack itself used (a wait for a shared core is not its limit)
        return f"CPU {step.cpu_percent or 0:.0f}% of {cores}, {_n(step.rps)} req/s at its limit"
    if v.kind == QUEUEING:
        waiting = w.waiting
        if step.stale and "no answer" in v.reason:
            return f"{waiting:,} waiting, {step.stale:,} with no answer for > {step.seconds:.0f} s"
        if waiting:
            return f"{waiting:,} waiting, req/s flat at {_n(step.rps)}"
        return f"req/s flat at {_n(step.rps)}, latency ×{_growth(v.reason)}"
    return v.reason


def _growth(reason: str) -> str:
    # the rule's own reason carries the factor ("QPS flat, latency ×9.8", "p99 ×12")
    return reason.rpartition("×")[2] or "?"


def behind_schedule(rate: float | None, total: WindowStats) -> str:
    """Rate mode: "" when the stack keeps up, else how far behind it is."""
    if rate is None or total.seconds < 1.0 or rate <= 0:
        return ""
    delivered = (total.requests + _no_answer(total)) / total.seconds
    # a backlog worth more than 1/20 s of the schedule is behind, whatever the average
    if delivered >= BEHIND * rate and total.unsent <= max(1.0, rate / 20):
        return ""
    out = f"behind schedule: {_n(delivered)} of {_n(rate)} req/s"
    if total.late:
        out += f", {total.late:,} sent late"
    if total.unsent:
        out += f", {total.unsent:,} due, not sent"
    return out


def _no_answer(w: WindowStats) -> int:
    return sum(n for k, n in w.failures.items() if k not in (HTTP_STATUS, INVALID_BODY, ABANDONED))


def annotate(
    *,
    verdict: LevelVerdict | None,
    interval: WindowStats | None,
    total: WindowStats | None,
    rate: float | None,
    timeout: float,
    cpu_percent: float | None = None,
    cpu_capacity: float | None = None,
    cpu_us_per_request: float | None = None,
    warming: bool = False,
    climb: float | None = None,
    engine_limit: str = "",
    timeout_cause: str = "",
) -> str:
    """One plain-language sentence about this pane, or "" when nothing needs saying;
    `timeout_cause` (rules/wedge.py) says whether timeouts came from a full accept queue."""
    w = interval
    if verdict is not None and verdict.kind == STARVING:
        # first, even before a busy engine: an engine slower than the server cannot
        # leave one client seconds without an answer while it reads another's thousands
        return starving_sentence(w, total, verdict)
    if engine_limit:
        return f"the engine, not the server, limits these figures: {engine_limit}"
    if w is not None and w.seconds > 0:
        kind, n = dominant_failure(w)
        answered = w.requests
        if kind and n > 0.01 * max(1, answered + n):
            sentence = _failure_sentence(kind, w, timeout)
            if kind == TIMEOUT and timeout_cause:
                sentence += f": {timeout_cause}"
            return sentence
    if rate is not None and total is not None:
        behind = behind_schedule(rate, total)
        if behind:
            return behind.replace("behind schedule:", "cannot keep up: delivers", 1)
    if w is not None and w.waiting >= QUEUE_MIN and (w.rps > 0 or w.stale):
        # Little's law: the clients waiting, each waits about waiting / req/s
        wait_us = w.waiting / w.rps * 1e6 if w.rps > 0 else float(w.oldest_wait_us)
        served = f"{_n(w.rps)} req/s served" if w.rps > 0 else "none served"
        if (w.stale or (verdict is not None and verdict.kind == QUEUEING)) and (
            wait_us >= QUEUE_WAIT_US or w.stale
        ):
            return f"≈ {w.waiting:,} requests queued, each waits ~{_secs(wait_us)} ({served})"
        if wait_us >= QUEUE_WAIT_US and (verdict is None or verdict.kind != SATURATED):
            # not judged a queue: the same figures, said neutrally (Little's law)
            return f"{w.waiting:,} requests in flight, each takes ~{_secs(wait_us)} ({served})"
    if verdict is not None and verdict.kind == SATURATED and cpu_us_per_request:
        cores = (cpu_capacity or 100.0) / 100
        ceiling = cores * 1e6 / cpu_us_per_request
        return (
            f"CPU-bound: {cpu_us_per_request:,.0f} µs of CPU per request, so at most "
            f"≈ {_n(ceiling)} req/s on {cores:.0f} core" + ("s" if cores > 1 else "")
        )
    if warming and climb is not None and climb > 0.05:
        return f"warming up: req/s +{100 * climb:.0f}% since its first second at this load"
    if w is not None and w.oldest_wait_us > 0.5 * timeout * 1e6:
        return (
            f"the oldest request has waited {_secs(w.oldest_wait_us)} of the {timeout:g} s timeout"
        )
    return ""


def starving_sentence(
    w: WindowStats | None, total: WindowStats | None, verdict: LevelVerdict
) -> str:
    """What a starving verdict means, short enough for two lines of a narrow pane: the
    level's share (`total`) and the likely cause. Clients stuck in connect (the last
    interval, `w`) or connects that timed out point at the accept queue, unless TCP is
    up and the TLS handshake is what waits (`handshaking`: the server took them); connected ones
    at one of two causes that look alike from the client, told apart by whether the
    server's kernel acknowledged the request (`WindowStats.unacked`, from TCP_INFO): a
    server that reads other connections first leaves the request unread but acknowledged
    (uwsgi-http11's worker staying on one keep-alive connection; node-http at c=1000,
    measured: 235 of 1,000 acknowledged and unread for the whole level); a handshake
    whose last ACK a full listen backlog dropped leaves the client believing it is
    connected with its request never acknowledged."""
    if total is None or not total.starved_share:
        return f"{verdict.reason}, while the others are served"
    return starved_sentence(w, total)


def starved_sentence(w: WindowStats | None, total: WindowStats) -> str:
    """The starved share of `total` and its likely cause (see starving_sentence); also
    `load`'s report, which has no verdict."""
    share = f"{100 * total.starved_share:.0f}% of clients' time unanswered"
    share += f" (up to {_secs(total.starved_wait_us)})"
    starved_now = round(w.starved_share * w.in_flight) if w is not None else 0
    if total.errors.get(HANDSHAKE_TIMED_OUT, 0) > total.failures.get(CONNECT_TIMEOUT, 0) or (
        w is not None and w.handshaking and 2 * w.handshaking >= (starved_now or w.waiting)
    ):
        # TCP is up, so the server took them: its TLS is what does not answer
        return f"{share}: stuck in the TLS handshake, the server's TLS does not answer"
    if total.failures.get(CONNECT_TIMEOUT, 0) or (w is not None and 2 * w.connecting > w.waiting):
        return f"{share}: stuck in connect, the accept queue drops their SYNs"
    if w is None or not starved_now:
        return f"{share}: a worker held by another keep-alive client, or a full listen backlog"
    # the engine asked the kernel (TCP_INFO) whether the server's kernel acknowledged
    # each request over a second old: unacknowledged, its handshake was dropped
    if 2 * w.unacked >= starved_now:
        # what is known: the handshake's last ACK and the request were dropped (by a full
        # listen backlog, as a rule; a firewall does the same)
        return f"{share}: handshakes dropped, requests never acknowledged"
    return f"{share}: its kernel has their requests, the server reads others first"


def _failure_sentence(kind: str, w: WindowStats, timeout: float) -> str:
    n = w.failures.get(kind, 0)
    per_s = n / w.seconds if w.seconds else 0.0
    if kind == REFUSED:
        return f"connections refused ({_n(per_s)}/s): its listen queue is full or it is down"
    if kind == TIMEOUT:
        return f"{_n(per_s)} requests/s got no answer within the {timeout:g} s timeout"
    if kind == HTTP_STATUS:
        codes = ", ".join(str(c) for c in sorted(w.status) if c >= 400) or "≥ 400"
        return f"answers are errors (HTTP {codes}): nothing useful is served"
    if kind == INVALID_BODY:
        return "answers have the wrong body: the server does not serve this workload"
    if kind == RESET:
        return f"the server closes connections while requests are due ({_n(per_s)}/s)"
    if kind == CONNECT_TIMEOUT:
        return "connections are not accepted in time: its accept queue is full"
    if kind == DROPPED:
        return f"{_n(per_s)} requests/s dropped: they were due longer than the timeout"
    return f"{kind.replace('_', ' ')} failures: {_n(per_s)}/s"


# families whose workers read each request themselves, one connection at a time: a
# request that trickles in holds the worker, and every request queued behind it waits
HELD_BY_SLOW_CLIENTS = ("sync", "prefork")


def held_by_slow_clients(
    family: str,
    upload_s: float,
    share: float,
    window: WindowStats | None,
    busy_percent: float | None = None,
    capacity: float = 100.0,
) -> str:
    """Slow clients (engine.clients): "" unless they hold this stack's workers.

    The sign, measured: with at most half the clients slow, the median request — a fast
    one — took at least half an upload, so fast requests waited for slow ones to arrive.
    A server that buffers (nginx in front) or serves connections concurrently (async,
    greenlets) shows no such median; with every client slow, every server waits for its
    clients and nothing is said.

    And the workers must be idle while clients queue: `busy_percent` (the stack's CPU
    used plus its time waiting for a core, % of one core) under half its `capacity`. A
    long median alone is any queue: at c=50 on one gunicorn sync worker the median was
    57 ms with a 50 ms upload, yet the uploads had finished in the accept queue before
    the worker took them (885 req/s, against 192 at c=10) and the worker was busy or
    waiting for its shared core 90 % of the time — not held by its clients."""
    if upload_s <= 0 or share > 0.5 or family not in HELD_BY_SLOW_CLIENTS:
        return ""
    if window is None or window.requests == 0 or window.latency.p50 < 0.5 * upload_s * 1e6:
        return ""
    if busy_percent is not None and busy_percent >= 0.5 * capacity:
        return ""
    return (
        f"slow clients hold the worker: it waits ~{_secs(upload_s * 1e6)} for each slow "
        f"request to arrive ({100 * share:.0f}% of clients), and the fast ones queue behind "
        f"it (median {_secs(window.latency.p50)}, {_n(window.rps)} req/s)"
    )
