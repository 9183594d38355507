"""Plain-language sentences for a pane: what its judgment means, in words a room reads.

A state alone ("queueing") does not tell a room why; the judgment's figures do
(stackrace.rules.level: "500 wait ~5.7 s each, 300× the time one takes"), and a
sentence in words a non-specialist reads ("≈ 500 requests queued, each waits ~5.7 s")
tells what it means. The sentence is drawn from the same judgment of the same window
as the verdict line and the big figures, never from a window of its own, so a pane
tells one story:

- `annotate(...)`: at most one sentence, only when it matters: requests queued and their
  wait, a CPU-bound stack's ceiling, the kind of failure, a rate the stack cannot keep
  up with, a JIT warming up, an engine that limits the figures, a stack held back by a
  busy core. Nothing when it keeps up.
- `held_by_slow_clients(...)`: slow clients holding a sync worker, with its figures.
"""

from __future__ import annotations

from stackrace.engine.model import (
    CONNECT_TIMEOUT,
    DROPPED,
    FLOW_STALL,
    GOAWAY_UNPROCESSED,
    HTTP_STATUS,
    INVALID_BODY,
    NOT_THE_SERVERS,
    REFUSED,
    RESET,
    STREAM_REFUSED,
    STREAM_RESET,
    TIMEOUT,
    WindowStats,
)
from stackrace.rules import cores
from stackrace.rules.head_of_line import StreamLoad, head_of_line
from stackrace.rules.level import (
    CORE_LIMITED,
    ENGINE_LIMITED,
    FAILING,
    QUEUEING,
    SATURATED,
    STARVING,
    WARMING,
    WEDGED,
    Judgment,
    secs,
)
from stackrace.rules.starving import starved_sentence

# a stack is "behind schedule" when it delivers less than this share of the asked rate
BEHIND = 0.95


def _n(x: float) -> str:
    return f"{x:,.0f}"


_secs = secs


def dominant_failure(window: WindowStats) -> tuple[str, int]:
    """The failure kind with the most counts (abandoned left out), and its count."""
    kinds = [(n, k) for k, n in window.failures.items() if k not in NOT_THE_SERVERS and n > 0]
    if not kinds:
        return "", 0
    n, k = max(kinds)
    return k, n


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
    return sum(
        n
        for k, n in w.failures.items()
        if k not in (HTTP_STATUS, INVALID_BODY) and k not in NOT_THE_SERVERS
    )


def annotate(
    *,
    judgment: Judgment | None,
    interval: WindowStats | None,
    total: WindowStats | None,
    rate: float | None,
    timeout: float,
    cpu_capacity: float | None = None,
    cpu_us_per_request: float | None = None,
    timeout_cause: str = "",
    climb: float | None = None,
    load: StreamLoad | None = None,
) -> str:
    """One plain-language sentence about this pane's judgment, or "" when nothing needs
    saying; its figures are the judgment's own (the level's window). `interval` only
    says where starved clients are stuck now; `timeout_cause` (race/wedge.py) whether
    timeouts came from a full accept queue; `load`, how its level is carried (an h2
    pane's streams per connection: head-of-line blocking on a TCP connection is named
    before starving or a wedge, stackrace.rules.head_of_line)."""
    j = judgment
    if j is None or total is None:
        return ""
    if load is not None and j.state in (STARVING, WEDGED, FAILING):
        blocked = head_of_line(interval, total, load)
        if blocked:
            return blocked
    if j.state == STARVING:
        return starving_sentence(interval, total)
    if j.state == ENGINE_LIMITED:
        return f"the engine, not the server, limits these figures: {j.why}"
    if j.state in (FAILING, WEDGED):
        # the level's failures; at its very start (failing at once on what ended
        # lately), the last interval's
        w = total if total.failed or interval is None else interval
        kind, n = dominant_failure(w)
        if kind and n:
            sentence = _failure_sentence(kind, w, timeout)
            if kind == TIMEOUT and timeout_cause:
                sentence += f": {timeout_cause}"
            return sentence
        return ""
    if rate is not None:
        behind = behind_schedule(rate, total)
        if behind:
            return behind.replace("behind schedule:", "cannot keep up: delivers", 1)
    if j.state == SATURATED and cpu_us_per_request:
        cap = (cpu_capacity or 100.0) / 100
        ceiling = cap * 1e6 / cpu_us_per_request
        return (
            f"CPU-bound: {cpu_us_per_request:,.0f} µs of CPU per request, so at most "
            f"≈ {_n(ceiling)} req/s on {cap:.0f} core" + ("s" if cap > 1 else "")
        )
    if j.state == CORE_LIMITED:
        alone = cores.alone_on_a_core(cpu_us_per_request)
        if alone is not None:
            return (
                f"alone on a core: ≈ {_n(alone)} req/s "
                f"(its {cpu_us_per_request:,.0f} µs of CPU per request)"
            )
    if j.state in (QUEUEING, SATURATED) and j.wait_us is not None:
        waiting = max(total.waiting, round(total.in_flight))
        served = f"{_n(j.goodput)} req/s served" if j.goodput > 0 else "none served"
        return f"≈ {waiting:,} requests queued, each waits ~{secs(j.wait_us)} ({served})"
    if j.state == WARMING and climb:
        return f"warming up: req/s +{100 * climb:.0f}% since its first second at this load"
    if total.waiting and total.oldest_wait_us > 0.5 * timeout * 1e6:
        old = secs(total.oldest_wait_us)
        return f"the oldest request has waited {old} of the {timeout:g} s timeout"
    return ""


def starving_sentence(w: WindowStats | None, total: WindowStats) -> str:
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
    return starved_sentence(w, total)


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
    if kind == STREAM_RESET:
        codes = ", ".join(sorted(e[11:] for e in w.errors if e.startswith("RST_STREAM ")))
        return f"the server resets streams ({_n(per_s)}/s" + (f", {codes})" if codes else ")")
    if kind == STREAM_REFUSED:
        return f"the server refuses streams unprocessed ({_n(per_s)}/s): it takes no more now"
    if kind == GOAWAY_UNPROCESSED:
        return f"streams left unprocessed by the server's GOAWAY ({_n(per_s)}/s)"
    if kind == FLOW_STALL:
        return (
            f"{_n(per_s)} requests/s waited on the server's flow-control window "
            f"past the {timeout:g} s timeout"
        )
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
    """Slow clients (engine.slow_clients): "" unless they hold this stack's workers.

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
