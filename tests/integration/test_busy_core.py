"""A busy box still names a server's own queue (issue 47 item 5): one gunicorn sync worker
on an httpbin-like app at c=100, beside two CPU burners that take 30 % of its core each,
is QUEUEING with the busy core said — not "not judged: a busy core was the limit".

The burners are the test's own (a test that needs a busy machine makes it busy): two
real-time loops on the worker's core (tests/helpers.py `core_taken`), each spinning 30 %
of every 20 ms, so the worker waits on the run queue while they spin, the same on every
machine whatever else runs. The engine stays on the other core. `bench` measures c=1 (the
service time) and c=100 against the server as a user's `--url` with its `--pid`, and the
run file's levels are judged as `bench` and `report` judge them (report/judged.py).

The app's /delay?ms=3 sleeps 3 ms, then works ~2-3 ms of CPU: one takes ~5 ms, as
httpbin's pages did in issue 47's race. The margins: at c=100 one worker's clients wait
~100 service times, past 20 times the queueing bound; the busy core explains at most the
share of its time it lost (the burners' 60 % plus whatever else runs). Its accept queue
holds ~99 of the 100 clients (the kernel's figure: every worker busy), where half is the
rule's threshold.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import psutil
import pytest

from stackrace.report.judged import judgments
from stackrace.report.schema import BenchRun
from stackrace.rules.level import QUEUEING
from tests.helpers import CLI, core_taken, free_port, wait_for

pytestmark = pytest.mark.slow

APP_DIR = Path(__file__).parents[1] / "apps" / "busy"


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def sync_worker() -> Iterator[tuple[int, int, int]]:
    """One gunicorn sync worker serving the httpbin-like app: (port, arbiter, worker)."""
    port = free_port()
    gunicorn = Path(sys.executable).parent / "gunicorn"
    proc = subprocess.Popen(
        [str(gunicorn), "-w", "1", "-k", "sync", "-b", f"127.0.0.1:{port}",
         "--chdir", str(APP_DIR), "--timeout", "120", "httpbin_like:app"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    try:
        assert wait_for(lambda: _listening(port), timeout=20), "gunicorn did not listen"
        assert wait_for(lambda: psutil.Process(proc.pid).children(), timeout=20)
        worker = psutil.Process(proc.pid).children()[0].pid
        yield port, proc.pid, worker
    finally:
        proc.kill()
        for child in psutil.Process(proc.pid).children() if proc.poll() is None else []:
            child.kill()
        proc.wait()


def test_one_sync_worker_at_c100_beside_two_burners_is_queueing_with_the_busy_core_said(
    sync_worker: tuple[int, int, int], tmp_path: Path
) -> None:
    port, arbiter, worker = sync_worker
    out = tmp_path / "run.json"
    last = max(os.sched_getaffinity(0))
    with core_taken(worker, 0.3), core_taken(worker, 0.3):
        # the arbiter beside its worker (it only watches); the engine elsewhere: bench
        # puts its engine processes on the cores the stacks do not use, and a --url
        # server is not one it places, so it runs from a process kept off that core
        os.sched_setaffinity(arbiter, {last})
        others = set(os.sched_getaffinity(0)) - {last}
        argv = [*CLI, "bench", "--url", f"sync=http://127.0.0.1:{port}/delay?ms=3", "--pid",
                str(arbiter), "--concurrency", "1,100", "--duration", "3s", "--warmup",
                "1s", "--json", str(out), "--no-progress"]  # fmt: skip
        r = subprocess.run(
            argv, capture_output=True, text=True, timeout=300,
            preexec_fn=(lambda: os.sched_setaffinity(0, others)) if others else None,
        )  # fmt: skip
    assert r.returncode in (0, 1), r.stderr[-2000:]
    run = msgspec.json.decode(out.read_bytes(), type=BenchRun)
    (stack,) = run.stacks
    by_level = {lv.concurrency: lv for lv in stack.levels}
    top = by_level[100]
    # the machine was what the test made it: the worker waited for its core
    assert top.cpu_wait_percent >= 20, (top.cpu_percent, top.cpu_wait_percent)
    assert top.accept_queue is not None and top.accept_queue >= 50, top.accept_queue
    j = judgments(stack, run)[100]
    print(json.dumps({"state": j.state, "why": j.why, "cpu": top.cpu_percent,
                      "wait": top.cpu_wait_percent, "accept_queue": top.accept_queue}))  # fmt: skip
    assert j.state == QUEUEING and j.broken, j.why
    assert "its core was also busy: it ran" in j.why, j.why
    assert "in its accept queue: every worker busy" in j.why, j.why
