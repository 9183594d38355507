"""name_cause on constructed evidence windows: each cause of the documented set, its
sentence (the figure and the app's function), its advice, and when it says the evidence
is thin. The same windows the catalogue (tests/integration/test_why_catalogue.py)
captures from real servers, written by hand here so each rule is pinned alone."""

from __future__ import annotations

from stackrace.evidence.model import (
    CauseKind,
    EvidenceWindow,
    FrameShare,
    ProcessEvidence,
    QueueEvidence,
    ThreadState,
)
from stackrace.rules.cause import name_cause

S = ThreadState


def window(states: dict[ThreadState, int], threads: int = 1, **kw: object) -> EvidenceWindow:
    total = sum(states.values())
    frames: list[FrameShare] = kw.pop("frames", [])  # type: ignore[assignment]  # the test's own
    args: dict[str, object] = {
        "stack": "s",
        "level": 32,
        "started": 0.0,
        "seconds": 3.0,
        "sampled": True,
        "samples": total,
        "threads": threads,
        "workers": 1,
        "states": {k.value: v for k, v in states.items()},
        "frames": tuple(frames),
        "cores": 2,
    }
    args.update(kw)
    return EvidenceWindow(**args)  # type: ignore[arg-type]  # the test's own kwargs


def fn(name: str, line: int, samples: int, total: int, state: ThreadState) -> FrameShare:
    return FrameShare(name, "app.py", line, samples, samples / total, state)


def proc(cpu: float, name: str = "python", wait: float = 0.0) -> ProcessEvidence:
    return ProcessEvidence(pid=10, name=name, threads=1, cpu_share=cpu, core_wait_share=wait)


def test_a_sync_worker_asleep_in_its_backend_call_is_a_blocking_wait() -> None:
    w = window(
        {S.BLOCKED: 97, S.IDLE: 3},
        frames=[fn("wait_for_backend", 31, 97, 100, S.BLOCKED)],
        queue=QueueEvidence(depth_max=480, depth_mean=400, limit=2048),
    )
    c = name_cause(w)
    assert c.kind is CauseKind.BLOCKING_WAIT
    assert c.sentence == (
        "1 worker: 97 % of samples asleep in wait_for_backend (app.py:31); "
        "480 connections in the accept queue (limit 2,048)"
    )
    assert c.function is not None and c.function.function == "wait_for_backend"
    assert "threads" in c.advice and c.confidence == ""


def test_threads_queued_on_a_lock_name_the_lock_and_its_holder() -> None:
    w = window(
        {S.LOCK_WAIT: 700, S.BLOCKED: 90, S.ON_CPU: 10},
        threads=8,
        frames=[
            fn("hold_the_lock", 22, 700, 800, S.LOCK_WAIT),
            fn("hold_the_lock", 23, 90, 800, S.BLOCKED),
        ],
    )
    c = name_cause(w, workers=1, threads=8)
    assert c.kind is CauseKind.LOCK
    assert c.sentence.startswith("7 of 8 threads wait on a lock in hold_the_lock (app.py:22)")
    assert "holder sleeps at line 23" in c.sentence
    assert "lock" in c.advice


def test_a_lock_inside_a_pool_is_the_db_pool() -> None:
    w = window(
        {S.LOCK_WAIT: 600, S.BLOCKED: 200},
        threads=8,
        frames=[fn("get_connection", 20, 600, 800, S.LOCK_WAIT)],
        pool_waits=590,
        db_pool=2,
        db_connections=2,
    )
    c = name_cause(w)
    assert c.kind is CauseKind.DB_POOL
    assert c.sentence == (
        "6 of 8 threads wait for a database connection in get_connection (app.py:20); "
        "the pool holds 2 (2 in use)"
    )
    assert "pool" in c.advice


def test_the_pool_full_of_connections_names_the_pool_without_its_frames() -> None:
    w = window(
        {S.LOCK_WAIT: 500, S.BLOCKED: 300},
        threads=8,
        frames=[fn("query", 9, 500, 800, S.LOCK_WAIT)],
        db_pool=3,
        db_connections=3,
    )
    assert name_cause(w).kind is CauseKind.DB_POOL


def test_one_process_on_cpu_is_cpu_with_its_function() -> None:
    w = window(
        {S.ON_CPU: 95, S.IDLE: 5},
        frames=[fn("crunch_numbers", 12, 91, 100, S.ON_CPU)],
        processes=(proc(0.99),),
    )
    c = name_cause(w)
    assert c.kind is CauseKind.CPU
    assert c.sentence == "the process is on CPU 99 %: crunch_numbers (app.py:12) 91 % of samples"
    assert "processes" in c.advice


def test_samples_on_cpu_the_kernel_contradicts_are_not_cpu() -> None:
    """Seen under pyuwsgi: every sample "on CPU" while the kernel counted 0.0 cores, and
    the cause read "2 workers on CPU, 0.0 cores". The kernel's CPU time wins: no cpu,
    the kernel's side names what it can (here its threads asleep in calls)."""
    w = window(
        {S.ON_CPU: 100},
        threads=2,
        workers=2,
        frames=[fn("<module>", 6, 56, 100, S.ON_CPU)],
        processes=(proc(0.0, "uwsgi"), proc(0.01, "uwsgi")),
        kernel_states={S.BLOCKED.value: 80, S.IDLE.value: 20},
    )
    c = name_cause(w)
    assert c.kind is not CauseKind.CPU and c.kind is not CauseKind.GIL
    assert c.kind is CauseKind.BLOCKING_WAIT, c


def test_threads_waiting_for_the_gil_is_the_gil() -> None:
    w = window(
        {S.ON_CPU: 100, S.GIL_WAIT: 700},
        threads=8,
        frames=[
            fn("crunch_numbers", 12, 100, 800, S.ON_CPU),
            fn("crunch_numbers", 12, 700, 800, S.GIL_WAIT),
        ],
        processes=(proc(0.99),),
    )
    c = name_cause(w)
    assert c.kind is CauseKind.GIL
    assert c.sentence == (
        "the process is on CPU 99 %: crunch_numbers (app.py:12) 100 % of the samples on CPU; "
        "7 threads wait for the GIL"
    )
    assert "not threads" in c.advice


def test_a_full_accept_queue_comes_before_the_blocking_wait() -> None:
    w = window(
        {S.BLOCKED: 95, S.IDLE: 5},
        frames=[fn("slow", 9, 95, 100, S.BLOCKED)],
        queue=QueueEvidence(depth_max=9, depth_mean=8.5, limit=8, overflows=120),
    )
    c = name_cause(w)
    assert c.kind is CauseKind.ACCEPT_QUEUE
    assert c.sentence.startswith("the accept queue is full: 9 of 8 waiting, 120 connections")
    assert "slow (app.py:9)" in c.sentence and "backlog" in c.advice


def test_a_blocked_event_loop() -> None:
    w = window(
        {S.BLOCKED: 80, S.ON_CPU: 10, S.IDLE: 10},
        frames=[fn("fetch", 14, 80, 100, S.BLOCKED)],
        event_loop=True,
    )
    c = name_cause(w)
    assert c.kind is CauseKind.LOOP_BLOCKED
    assert "blocked 80 % of samples in a synchronous call in fetch (app.py:14)" in c.sentence
    assert "event loop" in c.advice


def test_garbage_collection_before_cpu() -> None:
    w = window(
        {S.GC: 60, S.ON_CPU: 35, S.IDLE: 5},
        frames=[fn("make_report", 14, 60, 100, S.GC)],
        processes=(proc(0.98),),
    )
    c = name_cause(w)
    assert c.kind is CauseKind.GC
    assert c.sentence == "60 % of samples collecting garbage in make_report (app.py:14)"


def test_restarts_come_first_and_say_what_the_workers_were_doing() -> None:
    w = window(
        {S.BLOCKED: 95, S.IDLE: 5},
        frames=[fn("overrun", 9, 95, 100, S.BLOCKED)],
        restarts=3,
    )
    c = name_cause(w)
    assert c.kind is CauseKind.WORKER_RESTARTS
    assert c.sentence == (
        "3 workers killed and restarted in 3 s; they were asleep in overrun (app.py:9) "
        "95 % of samples"
    )
    assert "timeout" in c.advice


def test_a_server_not_sampled_is_judged_from_the_kernel_and_says_so() -> None:
    w = window(
        {},
        sampled=False,
        not_sampled="not a Python process",
        processes=(proc(1.3, "go-server", wait=0.4),),
        kernel_states={S.ON_CPU.value: 40, S.IDLE.value: 60},
    )
    c = name_cause(w)
    assert c.kind is CauseKind.CPU
    assert c.sentence == "go-server is on CPU 1.3 of 2 cores and waited 0.4 more for one"
    assert c.function is None
    assert c.confidence == "named from the kernel's side only: not a Python process"


def test_one_process_never_asleep_beside_a_busy_machine_is_cpu() -> None:
    """Seen in the catalogue beside other work: a Go server held to one core used 0.64 of
    it and stood runnable 0.49 more; below the machine's 75 % and the starved half, yet
    it never slept: cpu, not unknown."""
    w = window(
        {},
        sampled=False,
        not_sampled="not a Python process",
        processes=(proc(0.635, "server", wait=0.492),),
        kernel_states={S.ON_CPU.value: 50, S.IDLE.value: 50},
    )
    assert name_cause(w).kind is CauseKind.CPU
    idle = window({}, sampled=False, processes=(proc(0.3, "server", wait=0.1),))
    assert name_cause(idle).kind is not CauseKind.CPU  # asleep most of the time


def test_a_server_not_sampled_asleep_in_calls_is_a_blocking_wait() -> None:
    w = window(
        {},
        sampled=False,
        not_sampled="not a Python process",
        processes=(ProcessEvidence(1, "php-fpm", 1, 0.05, 0.0, syscall="clock_nanosleep"),),
        kernel_states={S.BLOCKED.value: 80, S.IDLE.value: 20},
    )
    c = name_cause(w)
    assert c.kind is CauseKind.BLOCKING_WAIT
    assert c.sentence == "80 % of thread reads asleep in a call (clock_nanosleep)"


def test_thin_or_mixed_evidence_is_said() -> None:
    w = window({S.BLOCKED: 12, S.IDLE: 8}, frames=[fn("slow", 3, 12, 20, S.BLOCKED)])
    c = name_cause(w)
    assert c.kind is CauseKind.BLOCKING_WAIT
    assert "only 20 thread samples" in c.confidence


def test_nothing_dominant_is_unknown_with_what_was_seen() -> None:
    w = window({S.IDLE: 70, S.ON_CPU: 20, S.BLOCKED: 10})
    c = name_cause(w)
    assert c.kind is CauseKind.UNKNOWN
    assert c.sentence == "no single cause: idle 70 %, on CPU 20 %, blocked in a call 10 %"
    assert c.advice == ""


def test_names_are_kept_as_data() -> None:
    w = window({S.BLOCKED: 90}, frames=[fn("<script>\x1b[31m", 1, 90, 90, S.BLOCKED)])
    assert "<script>\x1b[31m (app.py:1)" in name_cause(w).sentence


def test_unknown_does_not_repeat_samples_the_kernel_contradicts() -> None:
    """Seen walking `--app` under uWSGI beside a CPU burner: "why: unknown: no single
    cause: on CPU 100 %" over a pane that read CPU 7 %. Samples the kernel's CPU time
    contradicts are not what was seen: the kernel's figure is, and the line says why the
    samples are left out."""
    w = window(
        {S.ON_CPU: 100},
        processes=(proc(0.07, "uwsgi"),),
        kernel_states={S.IDLE.value: 100},
    )
    c = name_cause(w)
    assert c.kind is CauseKind.UNKNOWN
    assert c.sentence == (
        "no single cause: CPU 0.1 cores (the samples' on CPU 100 % is not used: the"
        " kernel's CPU time contradicts it)"
    ), c.sentence


def test_a_worker_that_waited_for_a_core_longer_than_it_ran_is_not_told_to_work_less() -> None:
    """Seen beside four other stacks on one core: a sync worker ran 12 % and waited 45 %
    for a core; the kernel reads a runnable thread as running, so its sleep line showed
    "on CPU" 39 % of samples. The sentence says the samples cannot tell, and the knob is
    the core, not less work per request."""
    w = window(
        {S.ON_CPU: 63, S.BLOCKED: 23, S.IDLE: 14},
        frames=[fn("checkout", 25, 39, 100, S.ON_CPU)],
        processes=(proc(0.12, wait=0.45),),
    )
    c = name_cause(w)
    assert c.kind is CauseKind.CPU
    assert c.sentence == (
        "the process is on CPU 12 % and waited for a core 45 %: checkout (app.py:25) 39 % "
        "of samples, running or waiting for a core (they waited longer than they ran)"
    )
    assert c.advice.startswith("a core of its own")
    ran_more = window(
        {S.ON_CPU: 95, S.IDLE: 5},
        frames=[fn("crunch_numbers", 12, 91, 100, S.ON_CPU)],
        processes=(proc(0.8, wait=0.3),),
    )
    assert "waiting for a core" not in name_cause(ran_more).sentence
    assert "processes" in name_cause(ran_more).advice
