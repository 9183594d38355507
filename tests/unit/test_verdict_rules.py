"""The rules on synthetic levels (no servers): a full shared core or a busy machine is
not the stack's verdict, a worse state shows at once and a better one once it held, a
wedged server is WEDGED with what was seen, a full backlog is named, starving clients
are their own state. tests/unit/test_judgment_recorded.py: the same on recorded races."""

from __future__ import annotations

from typing import Any

import msgspec

from stackrace.engine.model import LatencySummary, WindowStats
from stackrace.race.live.verdicts import HOLD, JudgmentHold
from stackrace.rules.breaking import CpuShare, StepResult, step_result
from stackrace.rules.cores import alone_on_a_core, shared_core
from stackrace.rules.level import (
    AT_FULL_CPU,
    CORE_LIMITED,
    ENGINE_LIMITED,
    FAILING,
    KEEPING_UP,
    MEASURING,
    QUEUEING,
    SATURATED,
    STARVING,
    WEDGED,
    WEDGED_AFTER,
    Evidence,
    Judgment,
    breaking_point,
    judge,
    judge_steps,
)
from stackrace.rules.wedge import WedgeWatch, backlog_note, timeout_cause
from stackrace.stacks.listen import ListenState
from stackrace.stacks.signs import ServerSigns


def kind_of_break(steps: list[StepResult]) -> str:
    """The kind of the breaking point the rules find in `steps` (the test expects one)."""
    found = breaking_point(steps)
    assert found is not None, "no breaking point"
    return found.kind


def window(
    rps: float,
    mean_ms: float,
    seconds: float = 3.0,
    waiting: int = 0,
    fastest_ms: float = 0,
    **kw: Any,
) -> WindowStats:
    """A closed loop's level: `rps` answered, each in about `mean_ms` (Little's law: that
    many in flight), the fastest in `fastest_ms` (a tenth of the mean when not given)."""
    n = int(rps * seconds)
    fastest = fastest_ms or mean_ms / 10
    lat = LatencySummary(count=n, mean=mean_ms * 1000, p50=int(mean_ms * 1000),
                         p99=int(mean_ms * 3000), max=int(mean_ms * 4000),
                         min=int(fastest * 1000))  # fmt: skip
    kw.setdefault("in_flight", rps * mean_ms / 1000)
    return WindowStats(seconds=seconds, sent=n + waiting, requests=n, ok=n, rps=rps,
                       waiting=waiting, latency=lat, **kw)  # fmt: skip


# --- a shared core ----------------------------------------------------------------------


def test_a_stack_waiting_for_a_full_shared_core_has_no_verdict_of_its_own():
    """Four async stacks on one core at c=100: each used ~25 % and waited ~70 %; their
    requests waited ten times what one takes. Before: every one SATURATED ("uvicorn
    broke"). Now: not judged, limited by a busy core; the race's verdict is the core."""
    full = shared_core([(25, 70), (24, 71), (26, 69), (23, 72)], cores=1)
    assert full.full and full.headline() == (
        "the 4 stacks share one core, full of their own work (they ran 98% of it): "
        "figures compare shares"
    )
    assert "573" not in full.headline() and "282" not in full.headline()  # no summed waits
    share = CpuShare(used=25, capacity=100, waited=70, core_full=full.full)
    steps = [
        step_result(10, window(4000, 2.5, fastest_ms=0.2), share=share),
        step_result(100, window(4100, 24, fastest_ms=0.2), share=share),
    ]
    assert breaking_point(steps) is None
    # its figures are a share of the full core, queue or not: never a tick, never broken
    assert [j.state for j in judge_steps(steps)] == [CORE_LIMITED, CORE_LIMITED]
    # the same stack judged as CPU-bound by itself: SATURATED
    old = CpuShare(used=95, capacity=100)
    again = [step_result(s.level, s.window, share=old) for s in steps]
    assert kind_of_break(again) == SATURATED


def test_a_full_core_names_what_filled_it():
    """Four stacks whose CPU adds to 63 % of the one core they share, each waiting for
    it: the core is full, and what filled it is other programs, said so (the header
    once said "which is full" and named nothing)."""
    others = shared_core([(16, 40), (15, 41), (17, 39), (15, 40)], cores=1)
    assert others.full
    said = others.headline()
    assert said == (
        "the 4 stacks share one core, full: they ran 63% of it, other programs took the "
        "rest: figures compare shares"
    )
    two = shared_core([(90, 10), (85, 12)], cores=2)
    assert two.full and "they ran 88% of them" in two.headline()


def test_a_stack_cpu_bound_by_itself_stays_saturated_and_a_blocked_one_queues():
    full = CpuShare(used=85, capacity=100, waited=10, core_full=True)
    steps = [
        step_result(10, window(4000, 2.5, fastest_ms=0.2), share=full),
        step_result(100, window(4050, 25, fastest_ms=0.2), share=full),
    ]
    assert kind_of_break(steps) == SATURATED
    # a sync worker blocked on I/O on the same full core: its own CPU is low, it queues
    sync = CpuShare(used=8, capacity=100, waited=5, core_full=True)
    steps = [
        step_result(1, window(90, 11, fastest_ms=10.5), share=sync),
        step_result(10, window(91, 110, fastest_ms=10.5), share=sync),
    ]
    assert kind_of_break(steps) == QUEUEING


def test_a_stack_on_time_with_its_cpu_spent_is_at_full_cpu_never_a_tick():
    """uvicorn at c=500 on the core it shares: each request waits ~25 ms against ~13 ms
    to serve one (on time), its CPU at 90 % of the core. A tick would promise room for
    more load it does not have; it is no breaking point either. With CPU to spare the
    same figures keep up."""
    spent = CpuShare(used=90, capacity=100, waited=2)
    j = judge(Evidence(step_result(500, window(20000, 25, fastest_ms=13), share=spent)))
    assert j.state == AT_FULL_CPU and not j.green and not j.broken and not j.not_judged
    assert j.why.startswith("CPU 90% of 1 core: no room for more load · a request waits ~25")
    room = CpuShare(used=40, capacity=100, waited=2)
    j = judge(Evidence(step_result(500, window(20000, 25, fastest_ms=13), share=room)))
    assert j.state == KEEPING_UP and j.green


def test_a_stack_waiting_for_a_core_another_process_holds_is_not_judged():
    """A stack with a core of its own, a busy loop beside it: it ran 55 % and waited
    40 % — its queue is the machine's, not its own (a busy machine is the normal case)."""
    busy = CpuShare(used=55, capacity=100, waited=40, core_full=False)
    j = judge(Evidence(step_result(200, window(4000, 50, fastest_ms=0.3), share=busy)))
    assert j.state == CORE_LIMITED and not j.broken and j.not_judged
    assert j.why.startswith("its core busy with other work: it ran 55%, and waited 42% of the")
    # waiting a little is no excuse: its own queue
    calm = CpuShare(used=55, capacity=100, waited=5)
    j = judge(Evidence(step_result(200, window(4000, 50, fastest_ms=0.3), share=calm)))
    assert j.state == QUEUEING


def test_shared_core_not_full_and_the_estimate_alone_on_a_core():
    assert not shared_core([(20, 1), (15, 0)], cores=1).full
    assert not shared_core([(95, 0)], cores=1).full  # one stack: its own verdict
    assert alone_on_a_core(53.6) == 1e6 / 53.6
    assert alone_on_a_core(None) is None and alone_on_a_core(0) is None


# --- worse at once, better once it held --------------------------------------------------


def j(state: str, level: int = 200, why: str = "") -> Judgment:
    return Judgment(level, state, why or state, 0.0, None, 0)


def test_a_worse_state_shows_at_once_and_a_better_one_only_once_it_has_held():
    hold = JudgmentHold()
    shown, since = hold.feed(10.0, j(MEASURING))
    assert shown.state == MEASURING and since == 10.0
    shown, since = hold.feed(10.25, j(KEEPING_UP))  # measured: shown at once
    assert shown.state == KEEPING_UP
    shown, since = hold.feed(10.5, j(QUEUEING, why="q1"))  # worse: at once
    assert shown.state == QUEUEING and since == 10.5 and shown.why == "q1"
    # noise — keeping up for a moment — is never shown
    t = 10.75
    for state in (KEEPING_UP, KEEPING_UP, QUEUEING, KEEPING_UP):
        shown, since = hold.feed(t, j(state, why="q2"))
        assert shown.state == QUEUEING and since == 10.5
        t += 0.25
    # the same state: its figures follow the measurement
    assert hold.feed(t, j(QUEUEING, why="q3"))[0].why == "q3"
    # a better state holds for HOLD seconds, then shows, since when it began
    start = t = t + 0.25
    while t - start < HOLD:
        assert hold.feed(t, j(KEEPING_UP))[0].state == QUEUEING
        t += 0.25
    shown, since = hold.feed(t, j(KEEPING_UP))
    assert shown.state == KEEPING_UP and since == start
    # failing after that: at once; a new level starts afresh
    assert hold.feed(t + 0.25, j(FAILING))[0].state == FAILING
    shown, since = hold.feed(t + 0.5, j(MEASURING, 500))
    assert shown.state == MEASURING and shown.level == 500 and since == t + 0.5


# --- failing at once ------------------------------------------------------------------


def test_every_request_ending_lately_as_a_timeout_is_failing_however_many_still_wait():
    """gunicorn sync at c=1,000, 12 s into the level: 50 answered at its start, then
    only timeouts — 8 so far — while 950 clients waited the whole level. Of every
    attempt (the stale waiting counted) under 1 % failed, so before it read QUEUEING
    "at 0 req/s" for seconds while every request that ended was a timeout."""
    lat = LatencySummary(count=50, mean=5_000_000, p50=5_000_000, p99=9_000_000, min=11_000)
    w = WindowStats(seconds=12.0, sent=1058, requests=50, ok=50, waiting=1000, stale=950,
                    failures={"timeout": 8}, latency=lat, in_flight=1000.0,
                    oldest_wait_us=12_000_000)  # fmt: skip
    step = StepResult(1000, w)
    assert step.errors / step.attempts < 0.01
    assert judge(Evidence(step)).state == QUEUEING  # the totals alone
    lately = WindowStats(seconds=2.0, failures={"timeout": 8})
    judged = judge(Evidence(step, recent=lately))
    assert judged.state == FAILING and judged.why == "8 of the last 8 failed (timed out)"


def test_errors_fail_whatever_the_engine_did_timeouts_under_its_limit_are_not_judged():
    """A 404 is the server's answer whatever the engine's state; a request that ran out
    of time while the engine waited for its core half the time may be the engine's."""
    lat = LatencySummary(count=900, mean=10_000, p50=10_000, p99=20_000, min=9_000)
    base: dict[str, Any] = dict(seconds=3.0, latency=lat, in_flight=10.0)
    starved = "its engine waited for a core 52% of the time (2,000µs per wake-up)"
    errors = WindowStats(requests=900, ok=800, failures={"http_status": 100}, **base)
    j = judge(Evidence(StepResult(10, errors, engine_limit=starved)))
    assert j.state == FAILING and "HTTP" in j.why
    timeouts = WindowStats(requests=900, ok=900, failures={"timeout": 100}, **base)
    j = judge(Evidence(StepResult(10, timeouts, engine_limit=starved)))
    assert j.state == ENGINE_LIMITED and "10.0% failed (timed out)" in j.why and not j.broken
    assert judge(Evidence(StepResult(10, timeouts))).state == FAILING  # no limit: its own


# --- wedged -----------------------------------------------------------------------------


def signs(t: float, queue: int = 0, backlog: int = 2048, close_wait: int = 0,
          log: dict[str, int] | None = None, exited: int = 0) -> ServerSigns:  # fmt: skip
    listen = ListenState(1234, True, queue, backlog, established=queue + close_wait,
                         close_wait=close_wait)  # fmt: skip
    return ServerSigns(t, listen, log or {}, exited)


def test_a_server_that_answers_nothing_while_a_client_waits_is_wedged_with_the_reasons():
    """After c=1000, gunicorn sync at c=1: one client in connect, nothing answered;
    the kernel holds 2,049 of 2,048 in its accept queue and 1,634 closed connections;
    its log says WORKER TIMEOUT six times in the last minute, its worker restarted."""
    watch = WedgeWatch()
    start = signs(0.0, log={"WORKER TIMEOUT": 2, "worker booted": 3}, exited=2)
    assert watch.feed(0.0, window(90, 11, seconds=0.25), start) is None  # answers came
    stuck = WindowStats(seconds=0.25, sent=1, waiting=1, connecting=1)
    t = 0.25
    while t < WEDGED_AFTER:
        assert watch.feed(t, stuck, start) is None  # not yet: a stall is timed
        t += 0.25
    later = signs(t, queue=2049, close_wait=1634,
                  log={"WORKER TIMEOUT": 8, "worker booted": 9}, exited=8)  # fmt: skip
    wedge = watch.feed(t + 0.25, stuck, later)
    assert wedge is not None and wedge.seconds >= WEDGED_AFTER
    step = StepResult(1, WindowStats(seconds=t, sent=1, waiting=1, connecting=1, stale=1))
    judged = judge(Evidence(step, stalled_s=wedge.seconds, stall_why=wedge.detail()))
    assert judged.state == WEDGED and judged.level == 1 and judged.broken
    proof = judged.why
    assert proof.startswith(f"no answer for {wedge.seconds:.0f} s while 1 wait")
    assert "1 stuck in connect (it accepts nothing)" in proof
    assert "accept queue 2,049 of 2,048 (full)" in proof
    assert "1,634 closed by clients (CLOSE-WAIT)" in proof
    assert "WORKER TIMEOUT ×6" in proof and "6 of its processes exited" in proof
    # one answer ends the stall
    assert watch.feed(t + 0.5, window(4, 250, seconds=0.25), later) is None


def test_nobody_waiting_is_no_stall():
    watch = WedgeWatch()
    idle = WindowStats(seconds=0.25)
    assert all(watch.feed(t / 4, idle, None) is None for t in range(40))


def test_a_full_backlog_and_the_cause_of_timeouts_are_named():
    backlogged = window(4000, 30, waiting=1000, connecting=872)
    note = backlog_note(signs(0, queue=129, backlog=128), backlogged)
    assert note == "its listen backlog is full (129 of 128): 872 clients wait in connect"
    assert backlog_note(signs(0, queue=3, backlog=128), backlogged) == ""
    assert "is full (129 of 128)" in timeout_cause(signs(0, queue=129, backlog=128))
    assert "is not full (3 of 128)" in timeout_cause(signs(0, queue=3, backlog=128))
    assert timeout_cause(None) == ""


# --- starving: some clients get nothing while others are served -------------------------


def _level(
    seconds: float,
    answered_us,
    ages_at,
    timeouts_at=lambda t: 0,
    clients: int = 10,
    unacked: bool = False,
    handshaking: bool = False,
):
    """A level as the driver aggregates it, one 250 ms engine report at a time:
    `answered_us(t)`: the latencies answered in the interval ending at t; `ages_at(t)`:
    the ages (µs) of the requests waiting then; `timeouts_at(t)`: timeouts in it;
    `unacked`: the server's kernel never acknowledged those over a second old;
    `handshaking`: those over a second old are connected and in a TLS handshake."""
    from stackrace.engine.aggregate import TargetAggregate
    from stackrace.engine.channel import TargetReport
    from stackrace.engine.histogram import index_of
    from stackrace.engine.model import TIMEOUT, TargetSpec

    def pairs(values) -> list[int]:
        counts: dict[int, int] = {}
        for v in values:
            counts[index_of(v)] = counts.get(index_of(v), 0) + 1
        return [x for i in sorted(counts) for x in (i, counts[i])]

    agg = TargetAggregate(TargetSpec(id="t", url="http://127.0.0.1:1/"))
    agg.reset_total()
    step, t = 0.25, 0.0
    snap = None
    while t < seconds - 1e-9:
        t += step
        agg.begin_interval()
        answered, ages, lost = answered_us(t), ages_at(t), timeouts_at(t)
        report = TargetReport(
            id="t", sent=len(answered) + lost, requests=len(answered), ok=len(answered),
            bytes=0, late=0, failures={TIMEOUT: lost} if lost else {}, status={},
            errors={}, hist=pairs(answered), hist_unc=None, open=clients, want=clients,
            rate=None, waiting=len(ages), waiting_ages=pairs(ages),
            unacked=sum(1 for a in ages if a >= 1_000_000) if unacked else 0,
            connecting=sum(1 for a in ages if a >= 1_000_000) if handshaking else 0,
            handshaking=sum(1 for a in ages if a >= 1_000_000) if handshaking else 0,
            inflight_sum=clients * 5, inflight_samples=5,
        )  # fmt: skip
        agg.add_report(report, step, 0.0, latest=True)
        snap = agg.end_interval(counting=True)
    assert snap is not None
    return snap.total


def _uwsgi_http11(seconds: float = 8.0):
    """One connection answered every 100 µs; nine wait from staggered starts until their
    10 s timeout, then start again (uwsgi-http11, one worker, c=10, measured 2026-11-24)."""

    def age(k: int, t: float) -> int:
        return int(((t + 1.1 * k) % 10.0) * 1e6)

    def timeouts(t: float) -> int:
        return sum(1 for k in range(9) if (t + 1.1 * k) % 10.0 < 0.25)

    return _level(seconds, lambda t: [100] * 2_500, lambda t: [age(k, t) for k in range(9)] + [50],
                  timeouts)  # fmt: skip


def test_one_client_served_and_nine_starving_is_starving_not_a_tick():
    """uWSGI's native socket, one worker, c=10: one connection got every answer, nine
    waited until their 10 s timeout. Under 1 % of the *attempts* failed, so before this
    rule the verdict was "no breaking point" and the pane said "✓ no failures". In the
    clients' time it is most of nine in ten (each wait counts once it passed a second)."""
    from stackrace.race.live.explain import annotate

    w = _uwsgi_http11()
    assert w.failed / w.requests < 0.01
    assert 0.7 < w.starved_share < 0.9 and 9_000_000 < w.starved_wait_us <= 10_000_000, w
    share = f"{100 * w.starved_share:.0f}%"
    steps = [step_result(1, window(9000, 0.1)), step_result(10, w)]
    v = breaking_point(steps)
    assert v is not None and v.kind == STARVING and v.level == 10
    assert v.reason.startswith(f"{share} of 10 clients' time: no answer for up to 9.")
    judged = judge(Evidence(steps[1], others=steps))
    assert judged.state == STARVING and not judged.green
    said = annotate(judgment=judged, interval=w, total=w, rate=None, timeout=10.0)
    # the engine saw their requests acknowledged by the server's kernel (TCP_INFO)
    assert said == (
        f"{share} of clients' time unanswered (up to 9.9 s): its kernel has their requests, "
        "the server reads others first"
    )
    assert len(said) <= 118  # two lines of a pane in a row of three, wrapped at words


def test_a_burst_past_the_listen_backlog_is_named_by_the_unacknowledged_requests():
    """Clients that believe they are connected, whose requests the server's kernel never
    acknowledged: a full listen backlog dropped the handshake's last ACK."""
    from stackrace.race.live.explain import starving_sentence

    def ages(t: float) -> list[int]:
        return [int((t + 0.7) * 1e6)] * 140 + [15_000] * 860

    w = _level(4.0, lambda t: [13_000] * 12_000, ages, clients=1000, unacked=True)
    assert w.unacked == 140 and 0.1 < w.starved_share < 0.14
    v = judge(Evidence(step_result(1000, w, share=CpuShare(used=99, capacity=100))))
    assert v.state == STARVING  # unfair service is its own, whatever its CPU
    said = starving_sentence(w, w)
    assert said.endswith(": handshakes dropped, requests never acknowledged")
    assert len(said) <= 118
    assert "queued" not in said


def test_handshakes_that_stall_name_the_servers_tls_not_its_accept_queue():
    """https: clients whose TCP connect completed (the server took them) and whose TLS
    handshake gets no answer are `connecting` (nothing written) but not in an accept
    queue: the sentence names the TLS handshake (`handshaking`, from the engine)."""
    from stackrace.race.live.explain import starving_sentence

    def ages(t: float) -> list[int]:
        return [int((t + 0.7) * 1e6)] * 300 + [15_000] * 700

    w = _level(4.0, lambda t: [13_000] * 12_000, ages, clients=1000, handshaking=True)
    assert w.connecting == w.handshaking == 300 and w.starved_share > 0.1, w
    said = starving_sentence(w, w)
    assert said.endswith(": stuck in the TLS handshake, the server's TLS does not answer"), said
    assert "accept queue" not in said and len(said) <= 118
    # the handshakes the connect timeout ended say it too, once the clients reconnect
    ended = msgspec.structs.replace(w, connecting=0, handshaking=0,
                                    errors={"handshake timed out": 40})  # fmt: skip
    said = starving_sentence(ended, ended)
    assert "TLS handshake" in said, said
    # the same clients still in the TCP connect: not the TLS handshake
    plain = msgspec.structs.replace(w, handshaking=0)
    said = starving_sentence(plain, plain)
    assert "TLS" not in said, said


def test_a_fair_queue_is_queueing_not_starving():
    """gunicorn sync at c=1000: everyone waits in the accept queue in turn, so the
    waiting are as old as the answered took; nobody is starved."""

    def ages(t: float) -> list[int]:
        return [int(i * 1_100) for i in range(1_000)]  # 0–1.1 s old

    w = _level(6.0, lambda t: [900_000 + 4_000 * i for i in range(25)], ages, clients=1000)
    assert w.starved_share == 0.0
    steps = [step_result(10, window(1000, 2.0)), step_result(1000, w)]
    v = breaking_point(steps)
    assert v is not None and v.kind == QUEUEING
    # a queue that reaches the timeout: the answered took as long, so no one is starved
    slow = _level(6.0, lambda t: [9_500_000] * 8, lambda t: [int(9e6)] * 100,
                  lambda t: 2, clients=100)  # fmt: skip
    assert slow.starved_share == 0.0


def test_starving_needs_a_share_of_the_clients_time_and_someone_served():
    # one client of a thousand in a SYN retransmit for three seconds: a sliver
    def ages(t: float) -> list[int]:
        return [4_000] * 999 + ([int((t - 2.0) * 1e6)] if t > 2.0 else [4_000])

    one = _level(6.0, lambda t: [5_000] * 1_000, ages, clients=1000)
    assert 0 < one.starved_share < 0.001
    assert judge(Evidence(step_result(1000, one))).state != STARVING
    # nothing answered at all: not "others are served" (that is stale, or wedged)
    none = _level(3.0, lambda t: [], lambda t: [int(t * 1e6) + 3_000_000] * 10)
    assert none.starved_share == 0.0


def test_a_cpu_bound_stack_that_starves_is_starving():
    """Starving is the server's unfairness, named whatever its CPU: a CPU-bound server
    that answers one client while nine wait 10 s is not merely "saturated"."""
    w = _uwsgi_http11()
    v = judge(Evidence(step_result(10, w, share=CpuShare(used=97, capacity=100))))
    assert v.state == STARVING
    assert "clients' time: no answer for up to 9." in v.why


def test_a_level_that_answered_nothing_while_a_client_waited_it_out_is_judged():
    """bench, rotate isolation: a one-worker server left busy answered nothing at c=1 for
    the whole 3 s level. One attempt is under the 20 a level needs to be judged, so the
    summary said "no breaking point up to the highest level"; a client that waited the
    whole level is the verdict itself."""
    w = WindowStats(seconds=3.25, sent=1, carried_in=1, waiting=1, oldest_wait_us=5_779_455,
                    stale=1, in_flight=1.0)  # fmt: skip
    step = step_result(1, w)
    assert step.enough
    v = breaking_point([step])
    assert v is not None and v.kind == QUEUEING and v.reason == "1 got no answer in the level's 3 s"
    # too short a level is still not judged
    assert not step_result(1, WindowStats(seconds=0.5, sent=1, waiting=1, stale=1)).enough


def test_unacked_reads_the_kernels_tcp_info():
    """`tcpi_unacked` is the u32 at byte 24 of struct tcp_info (linux/tcp.h); a socket
    whose TCP_INFO cannot be read counts as acknowledged (0), never as a crash."""
    import socket
    import struct

    from stackrace.engine.transport import unacked

    class Info:  # the bytes a kernel would return, laid out as linux/tcp.h has them
        def __init__(self, data: bytes) -> None:
            self.data = data

        def getsockopt(self, level: int, name: int, size: int) -> bytes:
            assert (level, name, size) == (socket.IPPROTO_TCP, socket.TCP_INFO, 28)
            return self.data

    assert unacked(Info(bytes(24) + struct.pack("=I", 3))) == 3
    assert unacked(Info(bytes(20))) == 0  # a short answer
    assert unacked(None) == 0  # no socket (closed meanwhile)


# --- a busy core still names a server's own queue ----------------------------------------


def test_a_queue_no_share_of_a_core_explains_is_the_servers_own():
    """The httpbin race on a busy box: one gunicorn sync worker at c=100, "100 wait ~219
    ms each; one takes ~5.6 ms", while it ran 40 % of the time it wanted its core. With
    the core to itself it would still wait ~88 ms, past twice the 26 ms bound: its own
    queue, named with the busy core beside it. Before: not judged."""
    busy = CpuShare(used=40, capacity=100, waited=60, core_full=False)
    steps = [
        step_result(10, window(928, 10.8, fastest_ms=5.6), share=busy),
        step_result(100, window(456, 219, fastest_ms=5.6), share=busy),
    ]
    j = judge_steps(steps)[-1]
    assert j.state == QUEUEING and j.broken, j.why
    assert j.why == (
        "100 wait ~219 ms each (~88 ms with a core to itself); one takes ~5.6 ms (its "
        "fastest answer) · its core was also busy: it ran 40% of the time it wanted it"
    )
    assert kind_of_break(steps) == QUEUEING


def test_a_queue_the_share_explains_is_the_cores_and_not_judged():
    """The same worker's wait halved by a core four times as busy: ~219 ms × 10 % = 22
    ms with the core to itself, inside the bounds: the core's, not judged."""
    busy = CpuShare(used=10, capacity=100, waited=90, core_full=False)
    j = judge(Evidence(step_result(100, window(456, 219, fastest_ms=5.6), share=busy)))
    assert j.state == CORE_LIMITED and j.not_judged, j.why


def test_near_equal_waits_on_a_busy_core_are_never_queueing_beside_keeping_up():
    """The seed-002 preset's first seconds: gevent "▲ QUEUEING at c=10 · 10 wait ~23 ms"
    while it got its core 24 % of the time it wanted it, beside sync's "✓ keeping up ·
    waits ~19 ms". Scaled by its share, gevent's wait is ~6 ms: the busy core's, not a
    queue of its own; both stacks' verdicts say nothing against the server."""
    gevent = CpuShare(used=18, capacity=100, waited=57, core_full=False)
    sync = CpuShare(used=12, capacity=100, waited=20, core_full=False)
    g = judge(Evidence(step_result(10, window(430, 23, fastest_ms=1.0), share=gevent)))
    s = judge(Evidence(step_result(10, window(520, 19, fastest_ms=9.0), share=sync)))
    assert not g.broken and not s.broken, (g.why, s.why)
    assert g.state == CORE_LIMITED and s.state == KEEPING_UP
    # with its core to itself the same figures are gevent's own queue, as before
    alone = CpuShare(used=18, capacity=100, waited=1)
    a = judge(Evidence(step_result(10, window(430, 23, fastest_ms=1.0), share=alone)))
    assert a.state == QUEUEING


def test_a_worker_asleep_in_io_is_scaled_by_the_time_it_lost_not_its_share():
    """One sync worker on 10 ms waits beside other work (the CI run of
    test_bench_stacks): it ran 5 % and waited 12 %, so it got its core 29 % of the time
    it wanted one, yet lost only 12 % of its time. Scaled by 0.29 its 115 ms queue at
    c=10 read as the core's and it was never judged broken; scaled by the time it lost
    (~101 ms with a core to itself) it is its own queue."""
    io = CpuShare(used=5, capacity=100, waited=12, core_full=False)
    j = judge(Evidence(step_result(10, window(85, 115, fastest_ms=11), share=io)))
    assert j.state == QUEUEING and j.broken, j.why
    assert "(~101 ms with a core to itself)" in j.why


def test_a_stack_cpu_bound_by_itself_is_not_scaled_by_a_share():
    """Its own CPU was the limit: the busy core explains nothing (SATURATED, as ever)."""
    full = CpuShare(used=90, capacity=100, waited=60, core_full=False)
    j = judge(Evidence(step_result(100, window(4000, 25, fastest_ms=0.2), share=full)))
    assert j.state == SATURATED


def test_a_queue_held_in_its_accept_queue_is_the_servers_whatever_the_share():
    """The httpbin race on a busy box, on a core four times as busy: one gunicorn sync
    worker at c=100 ran 10 % of the time it wanted its core, so scaled by that share its
    ~219 ms wait is ~22 ms, inside the bounds: by Little's law alone the core's. But 97
    of its 100 clients sat in its accept queue (the kernel's figure): every worker was
    busy, a line that forms however fast the core. The server's own evidence names the
    queue: QUEUEING, with the busy core said beside it."""
    busy = CpuShare(used=10, capacity=100, waited=90, core_full=False)
    w = window(456, 219, fastest_ms=5.6)
    j = judge(Evidence(step_result(100, w, share=busy, accept_queue=97)))
    assert j.state == QUEUEING and j.broken, j.why
    assert j.why == (
        "100 wait ~219 ms each (~22 ms with a core to itself); one takes ~5.6 ms (its "
        "fastest answer) · 97 of 100 clients in its accept queue: every worker busy · its "
        "core was also busy: it ran 10% of the time it wanted it"
    )
    # the same figures without the kernel's look, or with an empty accept queue (a
    # server that takes every connection at once and queues inside): the core's
    for queued in (None, 0, 3):
        k = judge(Evidence(step_result(100, w, share=busy, accept_queue=queued)))
        assert k.state == CORE_LIMITED and k.not_judged, (queued, k.why)
    # and the same worker held back so hard it was core-limited before the queue is
    # looked at: its accept queue still makes it the server's
    limited = CpuShare(used=15, capacity=100, waited=80, core_full=False)
    assert judge(Evidence(step_result(100, w, share=limited))).state == CORE_LIMITED
    m = judge(Evidence(step_result(100, w, share=limited, accept_queue=97)))
    assert m.state == QUEUEING and "its core was also busy: it ran 16%" in m.why, m.why


def test_a_line_at_its_door_stays_the_servers_when_the_engine_only_waited_too():
    """One gunicorn sync worker at c=300 beside ./dev test's other lanes (CI, a run
    file kept): its engine used 4 % of a core and waited for one 50 % of the level,
    4 ms a wake-up, which made the level engine-limited; but 299 of its 300 clients sat
    in its accept queue and waited ~1.8 s, where one answer takes ~11 ms. A reader as
    slow as that stretches a worker's turn by 4 ms at most: the line is the server's,
    the engine's wait said beside it. An engine whose delay could be most of the wait
    still leaves the level not judged."""
    starved = "its engine waited for a core 50% of the time (4,062µs per wake-up)"
    w = window(57, 1800, seconds=1.75, waiting=300, fastest_ms=11, engine_wait_us=4062)
    j = judge(Evidence(step_result(300, w, engine_limit=starved, accept_queue=299)))
    assert j.state == QUEUEING and j.broken, j.why
    assert j.why.startswith("300 wait ~"), j.why
    assert j.why.endswith(f"· {starved}, not what the line waited for"), j.why
    # without the kernel's look at its door, or with its door empty: the engine's
    for queued in (None, 0):
        k = judge(Evidence(step_result(300, w, engine_limit=starved, accept_queue=queued)))
        assert k.state == ENGINE_LIMITED and not k.broken, (queued, k.why)
    # a short line (20 clients, ~60 ms each): the server's beside an engine that waited
    # 1 ms a wake-up; beside one that waited 20 ms, nearly a turn of its own, not judged
    for wake_us, state in ((1_000, QUEUEING), (20_000, ENGINE_LIMITED)):
        short = window(300, 60, waiting=20, fastest_ms=11, engine_wait_us=wake_us)
        m = judge(Evidence(step_result(20, short, engine_limit=starved, accept_queue=19)))
        assert m.state == state, (wake_us, m.why)


def test_a_short_line_at_its_door_is_the_servers_its_length_partly_the_cores():
    """One sync worker at c=5 on a core it got 20 % of the time it wanted: 5 wait ~50
    ms, past the ~22 ms bound; with the core to itself ~10 ms, inside it (by Little's
    law alone the core's). Four of its five clients sat in its accept queue: the line
    is the server's (one worker), and the verdict says how long it would be without
    the busy core beside the wait measured."""
    busy = CpuShare(used=20, capacity=100, waited=80, core_full=False)
    step = step_result(5, window(100, 50, fastest_ms=2.0), share=busy, accept_queue=4)
    j = judge(Evidence(step))
    assert j.state == QUEUEING, j.why
    assert j.why.startswith("5 wait ~50 ms each (~10 ms with a core to itself); one takes")
    assert "4 of 5 clients in its accept queue" in j.why
    assert judge(Evidence(step_result(5, window(100, 50, fastest_ms=2.0), share=busy))).state == (
        CORE_LIMITED
    )


def test_an_accept_queue_names_no_queue_the_wait_does_not_show():
    """The accept queue says whose a queue is, never that there is one: a server at c=10
    whose few queued connections wait ~3 ms with a 2 ms service time keeps up."""
    calm = CpuShare(used=30, capacity=100, waited=40, core_full=False)
    j = judge(Evidence(step_result(10, window(3000, 3.3, fastest_ms=2.0), share=calm,
                                   accept_queue=8)))  # fmt: skip
    assert j.state == KEEPING_UP, j.why


def test_the_state_never_flips_on_a_small_difference_in_the_wait_for_a_core():
    """Where the state flipped on a small difference: a wait for a core under 10 % of
    its capacity judged the raw queue, one over it a queue scaled by the time lost and
    held to twice the bounds. A stack at 1.5 × the bound that waited 9 % was QUEUEING,
    the same at 11 % not judged: near-equal waits, opposite states (issue 47, seed-002's
    first seconds). Now the scaling and its margin grow with the wait from nothing: the
    states along a sweep of the wait change once, from the server's queue to the
    core's, and waits a few points apart read the same."""
    states = []
    for waited in range(0, 91):
        share = CpuShare(used=10, capacity=100, waited=waited, core_full=False)
        # one takes ~5 ms: the bound is ~25 ms; they wait ~38 ms (1.5 × the bound)
        step = step_result(10, window(263, 38, fastest_ms=5.0), share=share)
        states.append(judge(Evidence(step)).state)
    changes = [i for i in range(1, len(states)) if states[i] != states[i - 1]]
    assert states[0] == QUEUEING and states[-1] == CORE_LIMITED, states
    assert len(changes) == 1, [(i, states[i]) for i in changes]
    assert states[9] == states[11] == QUEUEING  # the old flip: 9 % against 11 %
    # one flip, where the scaled wait meets the margin (~17 % lost: 38 ms × 0.83 = 32 ms
    # against 25 ms × 1.28), and the neighbours either side of it differ by one point
    assert 11 < changes[0] < 40, changes


def test_the_app_judges_with_the_accept_queue_its_signs_saw_at_the_level():
    """The live path: the keeper takes each member's CPU and accept queue (its signs:
    the kernel's look, once a second) at the level running now, the ones in hand when
    the level began left out (taken the second before it), and the pane's judgment
    weighs them: the same worker as above is QUEUEING with its accept queue said; with
    no look at it, or an empty queue, the core's."""
    from types import SimpleNamespace
    from typing import cast

    from stackrace.engine.model import EngineSnapshot, TargetSnapshot
    from stackrace.race.core.core import RaceCore
    from stackrace.race.live.verdict_keeper import VerdictKeeper
    from stackrace.rules.level_log import LevelLog
    from stackrace.stacks.sampler import ResourceSample

    def snapshot(seq: int, level: int, w: WindowStats) -> EngineSnapshot:
        t = TargetSnapshot("sync", "http://127.0.0.1:1/", level, level, None, w, w)
        return EngineSnapshot(seq, 3.0, False, False, 1, 10.0, 10.0, False, [t])

    def look(t: float, used: float, waited: float, queue: int | None) -> dict:
        listen = ListenState(port=1, listening=True, accept_queue=queue or 0, backlog=2048)
        return {
            "resources": ResourceSample(t=t, rss=0, uss=0, pss=0, cpu_percent=used,
                                        processes=2, threads=2, cpu_wait_percent=waited),
            "signs": ServerSigns(t=t, listen=listen) if queue is not None else None,
        }  # fmt: skip

    def keeper_at(w: WindowStats, queue: int | None) -> tuple[VerdictKeeper, SimpleNamespace]:
        """The level begins with the idle second's sample and look in hand (no wait for
        a core, nothing queued), then one of its own: `queue` queued, 90 % waited."""
        member = SimpleNamespace(stack_cpus=None, handle=SimpleNamespace(external=False),
                                 **look(1.0, 1.0, 0.0, 0))  # fmt: skip
        core = SimpleNamespace(
            members={"sync": member}, engine=SimpleNamespace(synthetic=False),
            placement=None, capacity=lambda mid: 100.0, target=lambda mid: None,
        )  # fmt: skip
        log = LevelLog()
        keeper = VerdictKeeper(cast(RaceCore, core), log)
        log.cpu_of = keeper.cpu_of
        log.feed(snapshot(1, 100, w))
        keeper.feed(snapshot(1, 100, w), 1.0)
        assert keeper.cpu_pending("sync") and keeper.accept_queue("sync") is None
        vars(member).update(look(2.0, 10.0, 90.0, queue))
        log.feed(snapshot(2, 100, w))
        keeper.feed(snapshot(2, 100, w), 2.0)
        assert not keeper.cpu_pending("sync")
        return keeper, member

    queued = window(456, 219, fastest_ms=5.6)
    keeper, _ = keeper_at(queued, 97)
    j, _since = keeper.judgment("sync", 2.0, 0.0)
    assert j is not None and j.state == QUEUEING, j
    assert "97 of 100 clients in its accept queue: every worker busy" in j.why
    assert "its core was also busy: it ran 10%" in j.why
    for queue in (None, 0):
        keeper, _ = keeper_at(queued, queue)
        k, _since = keeper.judgment("sync", 2.0, 0.0)
        assert k is not None and k.state == CORE_LIMITED, (queue, k)


def test_a_levels_first_second_names_no_queue_a_busy_core_could_explain():
    """The seed-002 preset's first seconds: gevent at c=10, "10 wait ~23 ms" against a
    ~21 ms bound, judged on the idle second's CPU sample (no wait for a core) while it
    waited 76 % for its core: "QUEUEING" for seconds beside sync keeping up. Until the
    level has a CPU sample of its own, a queue past the bounds by less than a busy core
    is held to is not named (measuring); one far past them (one sync worker's 5.6 s at
    c=500) is the server's at once; and once the sample is in, the scaled rule decides."""
    gevent = window(430, 23, fastest_ms=1.0)
    step = step_result(10, gevent, share=CpuShare(used=1, capacity=100, waited=0))
    first = judge(Evidence(step, cpu_pending=True))
    assert first.state == MEASURING and "its CPU at this level not sampled yet" in first.why
    assert judge(Evidence(step)).state == QUEUEING  # what the first second said before
    c500 = step_result(500, window(88, 5600, fastest_ms=19), share=CpuShare(used=3,
                       capacity=100, waited=0))  # fmt: skip
    assert judge(Evidence(c500, cpu_pending=True)).state == QUEUEING
    busy = step_result(10, gevent, share=CpuShare(used=18, capacity=100, waited=57))
    assert judge(Evidence(busy)).state == CORE_LIMITED


def test_an_http2_engine_limit_says_its_cpu_per_answer_framing_included():
    from stackrace.rules.engine import engine_limit

    w = WindowStats(seconds=2.0, requests=100_000, engine_cpu=98.0, http="2")
    why = engine_limit(w, saturated=True)
    assert why.startswith("engine saturated (98% of its core)")
    assert "HTTP/2, 19.6µs of engine CPU per answer, framing included" in why
    w.http = "1.1"
    assert "HTTP/2" not in engine_limit(w, saturated=True)
    assert engine_limit(WindowStats(seconds=2.0, requests=10, http="2")) == ""
