"""The catalogue of injected causes: each a small app with a known answer
(tests/apps/causes), served by a real server on 127.0.0.1, loaded past its knee by the
real engine (`stackrace load`, a subprocess, as a user runs it), captured with
`capture_window` while the load goes on and judged by `name_cause`: the cause and the
app's function must be named, every time.

One test per cause (parametrized), one for a server that cannot be sampled (Go: the
kernel's side alone), and a few causes again beside a CPU burner at 50 % of each core
(a busy machine must not change the answer). Windows are short (2 s) and loads small,
so the file stays within a couple of minutes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from stackrace.evidence.capture import CaptureTarget, capture_window
from stackrace.evidence.flame import flame_svg
from stackrace.evidence.model import CauseKind, EvidenceWindow
from stackrace.rules.cause import name_cause
from stackrace.stacks.launcher import Launcher
from stackrace.stacks.listen import listen_state
from stackrace.supervise.procs import die_with_parent
from tests.conftest_stacks import real_stack
from tests.helpers import CLI, free_port, needs_mariadb, wait_for

CAUSES = Path(__file__).parents[1] / "apps" / "causes"
BIN = Path(sys.executable).parent
GUNICORN = str(BIN / "gunicorn")
UVICORN = str(BIN / "uvicorn")
BURNER = Path(__file__).parents[1] / "servers" / "burner.py"
WINDOW_S = 2.0
WARM_S = 1.2  # the load runs this long before the window: past the knee, queues built


@dataclass(frozen=True)
class Case:
    """One injected cause: how to serve it, how hard to load it, what must be named."""

    id: str
    app: str  # module:attr under tests/apps/causes
    server: tuple[str, ...]  # "gunicorn" args after the app's own, or ("uvicorn",)
    concurrency: int
    kind: CauseKind
    function: str  # the app's function the sentence must name
    workers: int = 1
    threads: int = 1

    def command(self, port: int) -> list[str]:
        if self.server[:1] == ("uvicorn",):
            return [UVICORN, "--host", "127.0.0.1", "--port", str(port), "--app-dir",
                    str(CAUSES), "--no-access-log", "--log-level", "warning", self.app]  # fmt: skip
        return [GUNICORN, "--bind", f"127.0.0.1:{port}", "--workers", str(self.workers),
                "--no-control-socket", "--chdir", str(CAUSES), "--log-level", "warning",
                *self.server, self.app]  # fmt: skip


GTHREAD_8 = ("--worker-class", "gthread", "--threads", "8")
CASES = [
    Case("blocking-io-sync", "blocking_app:app", (), 24, CauseKind.BLOCKING_WAIT,
         "wait_for_backend"),
    Case("cpu-one-process", "cpu_app:app", (), 8, CauseKind.CPU, "crunch_numbers"),
    Case("gil-threads", "cpu_app:app", GTHREAD_8, 16, CauseKind.GIL, "crunch_numbers",
         threads=8),
    Case("lock-across-wait", "lock_app:app", GTHREAD_8, 32, CauseKind.LOCK, "hold_the_lock",
         threads=8),
    Case("accept-queue-full", "blocking_app:app", ("--backlog", "8"), 64,
         CauseKind.ACCEPT_QUEUE, "wait_for_backend"),
    Case("event-loop-blocked", "loop_app:app", ("uvicorn",), 16, CauseKind.LOOP_BLOCKED,
         "fetch_prices"),
    Case("gc-pauses", "gc_app:app", (), 8, CauseKind.GC, "make_report"),
    Case("worker-timeout", "overrun_app:app", ("--timeout", "1"), 8,
         CauseKind.WORKER_RESTARTS, "overrun", workers=2),
    Case("slow-log-handler", "logging_app:app", GTHREAD_8, 32, CauseKind.LOCK,
         "SlowHandler.emit", threads=8),
]  # fmt: skip
DB_CASE = Case("db-pool", "db_app:app", GTHREAD_8, 32, CauseKind.DB_POOL,
               "ConnectionPool.get", threads=8)  # fmt: skip


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def serving(case: Case, log: Path, env: dict[str, str] | None = None) -> Iterator[tuple[int, int]]:
    """The case's server on a free port, in a session of its own that dies with this
    process, its output in `log` (as the launcher keeps a stack's); yields (pid, port)
    once it accepts."""
    port = free_port()
    out = log.open("wb")
    proc = subprocess.Popen(
        case.command(port),
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=die_with_parent(),
        env={**os.environ, **(env or {})},
    )
    try:
        end = time.monotonic() + 20
        while not _listening(port):
            assert proc.poll() is None, log.read_text(errors="replace")[-2000:]
            assert time.monotonic() < end, f"{case.id}: the server did not listen in 20 s"
            time.sleep(0.1)
        yield proc.pid, port
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        out.close()


@contextlib.asynccontextmanager
async def loaded(
    port: int, concurrency: int, seconds: float, path: str = "/"
) -> AsyncIterator[None]:
    """`stackrace load` on the port for `seconds`, as a user runs it; the block runs once
    the load has built its queues (WARM_S)."""
    load = await asyncio.create_subprocess_exec(
        *CLI, "load", f"http://127.0.0.1:{port}{path}", "-c", str(concurrency),
        "-d", f"{seconds:.0f}s", "--timeout", "10s",
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT, preexec_fn=die_with_parent(),
    )  # fmt: skip
    try:
        # the load has reached the server (its connections open, on a busy machine
        # `stackrace load` takes a while to start), then its queues build
        end = time.monotonic() + 20
        while listen_state(port).busy < min(concurrency, 4) and time.monotonic() < end:
            await asyncio.sleep(0.1)
        await asyncio.sleep(WARM_S)
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            load.terminate()
        await load.communicate()


async def judge(case: Case, target: CaptureTarget) -> tuple[EvidenceWindow, str]:
    async with loaded(target.port or 0, case.concurrency, WARM_S + WINDOW_S + 2):
        window = await capture_window(target, stack=case.id, level=case.concurrency,
                                      seconds=WINDOW_S)  # fmt: skip
    cause = name_cause(window, workers=case.workers, threads=case.threads)
    said = f"{case.id}: {cause.kind} — {cause.sentence} [{cause.confidence}]"
    assert cause.kind is case.kind, f"{said}\nstates {window.states}, {window.samples} samples"
    assert cause.function is not None, said
    assert case.function in cause.sentence, said
    return window, said


def _target(pid: int, port: int, log: Path, **kw: object) -> CaptureTarget:
    return CaptureTarget(root_pid=pid, port=port, app_roots=(str(CAUSES),), log_path=str(log), **kw)  # type: ignore[arg-type]  # the fields' own types


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_each_injected_cause_is_named_with_its_function(case: Case, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with serving(case, log) as (pid, port):
        window, said = await judge(case, _target(pid, port, log))
    assert window.sampled and not window.not_sampled, said
    # its flame graph: valid XML, with the function that proves the cause in it
    svg = flame_svg(window.collapsed, title=case.id)
    ET.fromstring(svg)
    assert case.function.split(".")[-1] in svg
    print(said)


@needs_mariadb
async def test_a_pool_smaller_than_the_threads_is_the_db_pool(tmp_path: Path) -> None:
    from stackrace.db import ManagedMariaDB, db_env

    db = ManagedMariaDB(tmp_path / "mariadb", free_port(), scoped=True)
    try:
        db.ensure_ready(rows=1000)
        env = {**db_env(db.settings, 1000), "CAUSE_POOL_SIZE": "2"}
        log = tmp_path / "server.log"
        with serving(DB_CASE, log, env) as (pid, port):
            window, said = await judge(
                DB_CASE, _target(pid, port, log, db_pool=2, db_port=db.settings.port)
            )
        assert window.db_connections == 2, said
        assert "the pool holds 2 (2 in use)" in said
    finally:
        db.reset(wipe=True)
    print(said)


async def test_a_go_server_is_judged_from_the_kernel_alone(tmp_path: Path) -> None:
    """Go cannot be sampled: the window says so, and the kernel's side (its threads on
    CPU, its one core used: GOMAXPROCS=1) names cpu, with no function to name."""
    stack = real_stack("go-nethttp:workers=1")
    async with Launcher(tmp_path) as launcher:
        rs = await launcher.start(stack)
        target = CaptureTarget(root_pid=rs.root_pids[0], port=rs.port)
        async with loaded(rs.port, 64, WARM_S + WINDOW_S + 2, path="/json"):
            window = await capture_window(target, stack=stack.name, level=64, seconds=WINDOW_S)
    cause = name_cause(window)
    said = f"go: {cause.kind} — {cause.sentence} [{cause.confidence}]"
    assert not window.sampled and window.not_sampled, said
    assert "not a Python process" in window.not_sampled
    assert cause.kind is CauseKind.CPU, f"{said}\n{window.processes}"
    assert cause.function is None and "kernel" in cause.confidence
    print(said)


async def test_php_fpm_asleep_in_its_children_is_a_blocking_wait(tmp_path: Path) -> None:
    """PHP-FPM behind nginx (not Python: the kernel's side alone), its four children
    blocked in /io's usleep past the knee: blocking wait, from their system calls."""
    stack = real_stack("php-fpm-nginx:workers=4")
    async with Launcher(tmp_path) as launcher:
        rs = await launcher.start(stack)
        roots = rs.root_pids
        target = CaptureTarget(root_pid=roots[0], port=rs.port, other_roots=tuple(roots[1:]))
        async with loaded(rs.port, 32, WARM_S + WINDOW_S + 2, path="/io?ms=50"):
            window = await capture_window(target, stack=stack.name, level=32, seconds=WINDOW_S)
    cause = name_cause(window)
    said = f"php: {cause.kind} — {cause.sentence} [{cause.confidence}]"
    assert not window.sampled and "not a Python process" in window.not_sampled, said
    assert cause.kind is CauseKind.BLOCKING_WAIT, f"{said}\n{window.kernel_states}"
    assert {p.name for p in window.processes} >= {"nginx", "php-fpm8.2"}, window.processes
    print(said)


BUSY_CASES = [
    c for c in CASES if c.id in ("blocking-io-sync", "cpu-one-process", "lock-across-wait")
]


async def test_causes_are_named_the_same_beside_a_cpu_burner(tmp_path: Path) -> None:
    """A busy machine (half of each core burnt by another process) must not change the
    answer: the states come from the threads, not from how fast they ran."""
    burner = subprocess.Popen(
        [sys.executable, str(BURNER), "--share", "0.5", "--seconds", "90"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, preexec_fn=die_with_parent(),
    )  # fmt: skip
    try:
        for case in BUSY_CASES:
            log = tmp_path / f"{case.id}.log"
            with serving(case, log) as (pid, port):
                _, said = await judge(case, _target(pid, port, log))
            print("beside the burner:", said)
    finally:
        burner.terminate()
        burner.wait()


_CAPTURE_ALONE = """
import asyncio, sys
from stackrace.evidence.capture import CaptureTarget, capture_window
from stackrace.evidence.flame import flame_svg
target = CaptureTarget(root_pid=int(sys.argv[1]), port=int(sys.argv[2]))
async def main():
    print("capturing", flush=True)
    w = await capture_window(target, stack="s", level=1, seconds=float(sys.argv[3]))
    print(w.not_sampled or "sampled", flush=True)
asyncio.run(main())
"""


def _pyspy_sampling(pid: int) -> list[int]:
    """Every py-spy process on the machine sampling `pid`."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{entry.name}/cmdline").read_bytes().split(b"\0")
            if argv and argv[0].endswith(b"py-spy") and str(pid).encode() in argv:
                found.append(int(entry.name))
    return found


def test_no_py_spy_outlives_a_sigkilled_capture(tmp_path: Path) -> None:
    """stackrace SIGKILLed in the middle of a window: its py-spy processes go with it."""
    case = CASES[3]  # gthread: a worker of 9 threads, so both records run
    with serving(case, tmp_path / "server.log") as (pid, port):
        worker = next(iter(sorted(descendants_of(pid))))
        proc = subprocess.Popen(
            [sys.executable, "-c", _CAPTURE_ALONE, str(pid), str(port), "30"],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == b"capturing"
            assert wait_for(lambda: len(_pyspy_sampling(worker)) == 2, timeout=10)
        finally:
            proc.kill()
            proc.wait()
        assert wait_for(lambda: not _pyspy_sampling(worker), timeout=5), _pyspy_sampling(worker)


def descendants_of(pid: int) -> set[int]:
    return {c.pid for c in psutil.Process(pid).children(recursive=True)}


async def test_a_server_started_elsewhere_has_its_queue_and_says_why_no_more(
    tmp_path: Path,
) -> None:
    """A server stackrace did not start (`--url`): no processes to read, so the window
    says so in one line, and the accept queue (the kernel's, by port) is still there."""
    case = CASES[0]
    with serving(case, tmp_path / "server.log") as (_pid, port):
        window = await capture_window(
            CaptureTarget(root_pid=0, port=port), stack="url", level=1, seconds=1.0
        )
    assert not window.sampled and not window.processes
    assert window.not_sampled == (
        "the server was not started by stackrace (--url): its processes are unknown; "
        "start it from stackrace to sample its workers"
    )
    assert window.queue is not None and window.queue.limit  # the backlog, from the kernel
    assert name_cause(window).kind is CauseKind.UNKNOWN


_NGINX = """daemon off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {d}; proxy_temp_path {d}; fastcgi_temp_path {d};
  uwsgi_temp_path {d}; scgi_temp_path {d};
  server {{
    listen 127.0.0.1:{port};
    location = /status {{ stub_status; }}
    location / {{ return 200 "ok\\n"; }}
  }}
}}
"""


async def test_a_status_page_is_read_beside_the_kernels_side(tmp_path: Path) -> None:
    """nginx (not Python): its stub_status page's figures are in the window, named as
    the page names them, with its processes from the kernel."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        pytest.skip("nginx is not installed (scripts/setup.sh installs it)")
    port = free_port()
    conf = tmp_path / "nginx.conf"
    conf.write_text(_NGINX.format(d=tmp_path, port=port))
    proc = subprocess.Popen(
        [nginx, "-c", str(conf), "-p", str(tmp_path), "-e", str(tmp_path / "error.log")],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, preexec_fn=die_with_parent(),
    )  # fmt: skip
    try:
        assert wait_for(lambda: _listening(port), timeout=10)
        target = CaptureTarget(
            root_pid=proc.pid, port=port, status_url=f"http://127.0.0.1:{port}/status"
        )
        async with loaded(port, 8, WARM_S + 3):
            window = await capture_window(target, stack="nginx", level=8, seconds=1.0)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert window.status_source == "nginx stub_status", window.status
    assert window.status["active"] >= 1 and window.status["requests"] >= 1
    assert not window.sampled and "not a Python process (nginx)" in window.not_sampled
    assert {p.name for p in window.processes} == {"nginx"}
