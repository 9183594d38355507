"""The capture's pure parts: py-spy's raw output read, a thread's stacks put in states
with its system calls and the GIL record, and the status pages parsed (hostile text:
only numbers come out)."""

from __future__ import annotations

import os
import threading
from collections import Counter
from pathlib import Path

from stackrace.evidence.kernel import ProcessWatch, kernel_state
from stackrace.evidence.model import ThreadState
from stackrace.evidence.pyspy import (
    AppCode,
    Frame,
    ThreadSample,
    classify_thread,
    parse_raw,
    permission_fix,
)
from stackrace.evidence.status import parse_status

Stack = tuple[Frame, ...]
APP = "/srv/app"
IS_APP = AppCode((APP,))
LIB = "/usr/lib/python3.11"
RAW = (
    f"thread (101): MainThread;run ({LIB}/site-packages/gunicorn/workers/sync.py:132);"
    f"handle_request ({LIB}/site-packages/gunicorn/workers/sync.py:184);app ({APP}/app.py:13);"
    f"wait_for_backend ({APP}/app.py:8) 90\n"
    f"thread (101): MainThread;run ({LIB}/site-packages/gunicorn/workers/sync.py:132);"
    f"wait ({LIB}/site-packages/gunicorn/workers/sync.py:35) 10\n"
    "garbage without a count\n"
    "thread (oops) 3\n"
)


def test_raw_output_is_read_by_thread_innermost_first() -> None:
    threads = parse_raw(RAW)
    assert list(threads) == [101]
    stacks = threads[101]
    assert sum(stacks.values()) == 100
    top = max(stacks, key=lambda k: stacks[k])
    assert top[0] == Frame("wait_for_backend", f"{APP}/app.py", 8)
    assert top[-1].function == "run"


def _states(samples: list[ThreadSample]) -> dict[ThreadState, float]:
    out: dict[ThreadState, float] = {}
    for s in samples:
        out[s.state] = out.get(s.state, 0.0) + s.weight
    return out


def test_a_sleeping_app_call_is_blocked_and_the_servers_select_is_idle() -> None:
    calls = Counter({"clock_nanosleep": 90, "pselect6": 10})
    states = _states(classify_thread(1, 101, parse_raw(RAW)[101], calls, None, 0.0, IS_APP))
    assert round(states[ThreadState.BLOCKED]) == 90
    assert round(states[ThreadState.IDLE]) == 10


def test_an_app_whose_own_module_runs_uvloop_is_idle_while_the_loop_waits() -> None:
    # uvloop waits in C: the innermost Python frame is asyncio's runner, not selectors.py,
    # and the app's own `<module>` (its `asyncio.run`) sits below it. A bench read this
    # as "the event loop is blocked 86 % of samples in <module>" for an idle server.
    idle: Stack = (
        Frame("run", f"{LIB}/asyncio/runners.py", 118),
        Frame("run", f"{LIB}/asyncio/runners.py", 190),
        Frame("<module>", f"{APP}/server.py", 123),
    )
    calls = Counter({"epoll_wait": 86, "running": 14})
    states = _states(classify_thread(1, 7, {idle: 100}, calls, None, 0.0, IS_APP))
    assert ThreadState.BLOCKED not in states
    assert round(states[ThreadState.IDLE]) == 86


def test_pure_python_without_the_gil_while_another_holds_it_waits_for_the_gil() -> None:
    crunch: Stack = (Frame("crunch", f"{APP}/app.py", 9), Frame("app", f"{APP}/app.py", 15))
    stacks = {crunch: 100}
    held = {crunch: 10}  # it held the GIL in 10 of its 100 samples
    calls = Counter({"futex": 60, "running": 40})
    states = _states(classify_thread(1, 7, stacks, calls, held, 0.9, IS_APP))
    assert round(states[ThreadState.ON_CPU]) == 10
    assert round(states[ThreadState.GIL_WAIT]) == 90


def test_a_lock_line_waits_and_the_thread_sleeps_elsewhere(tmp_path: Path) -> None:
    app = tmp_path / "lock.py"
    app.write_text("\n" * 11 + "    with LOCK:\n        time.sleep(0.005)\n")
    with_lock: Stack = (Frame("hold", str(app), 12),)
    asleep: Stack = (Frame("hold", str(app), 13),)
    stacks = {with_lock: 88, asleep: 12}
    calls = Counter({"futex": 88, "clock_nanosleep": 11, "running": 1})
    samples = classify_thread(1, 7, stacks, calls, {}, 0.0, AppCode((str(tmp_path),)))
    by: dict[tuple[int, ThreadState], float] = {}
    for s in samples:
        key = (s.frames[0].line, s.state)
        by[key] = by.get(key, 0.0) + s.weight
    assert round(by[(12, ThreadState.LOCK_WAIT)]) == 88
    assert round(by[(13, ThreadState.BLOCKED)]) == 11


def test_status_pages_give_numbers_only() -> None:
    src, fig = parse_status(
        b"Active connections: 291 \\nserver accepts handled requests\\n 16630948 16630948 "
        b"31070465 \\nReading: 6 Writing: 179 Waiting: 106 \\n".replace(b"\\n", b"\n")
    )
    assert src == "nginx stub_status"
    assert fig["active"] == 291 and fig["waiting"] == 106
    src, fig = parse_status(
        b'{"pool": "<script>", "listen queue": 12, "active processes": 5, '
        b'"idle processes": 0, "max children reached": 3, "start time": "x"}'
    )
    assert src == "php-fpm status"
    assert fig == {
        "listen queue": 12.0,
        "active processes": 5.0,
        "idle processes": 0.0,
        "max children reached": 3.0,
    }
    src, fig = parse_status(b'{"listen_queue": 7, "workers": [{"status": "busy"}, {}]}')
    assert src == "uwsgi stats" and fig["busy workers"] == 1 and fig["listen_queue"] == 7
    assert parse_status(b"\x1b[31m<html>") == ("", {})


def test_a_refused_attach_is_one_line_with_the_fix() -> None:
    line = permission_fix(1234)
    assert "\n" not in line
    assert line.startswith("py-spy cannot attach to process 1234: ")
    assert "; " in line  # why; the fix


def test_the_kernel_names_what_a_thread_is_doing() -> None:
    assert kernel_state("running") is ThreadState.ON_CPU
    assert kernel_state("clock_nanosleep") is ThreadState.BLOCKED
    assert kernel_state("recvfrom") is ThreadState.BLOCKED
    assert kernel_state("epoll_wait") is ThreadState.IDLE
    assert kernel_state("syscall 999") is ThreadState.UNKNOWN
    watch = ProcessWatch.start(os.getpid())  # this process: reading /proc only
    calls = watch.read()
    # the thread reading is caught reading its own file
    assert calls.get(threading.get_native_id()) in ("running", "read")
    assert watch.per_thread and not watch.gone
