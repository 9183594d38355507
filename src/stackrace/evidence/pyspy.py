"""A Python worker's threads, sampled with py-spy without stopping them, each thread's
samples put in `ThreadState`s.

**Two `py-spy record`s per worker for the window, not a `py-spy dump` a round.** A dump
gives each thread's state at one instant (`active`, `owns_gil`), but it is a process
start each time: ~9.5 ms of CPU (its symbol tables read again), so twenty a second cost
a fifth of a core. A record starts once and samples cheaply: one in wall-clock mode
(`--idle`: every thread, idle or not) and one in GIL mode (`--gil`: only the thread
holding the GIL), non-blocking (the worker is never paused), each thread named by its
OS id. The record's counts carry no state, so each thread's stacks are put in states
with what else is known of that thread over the same window: its samples holding the
GIL (the GIL record) and its system calls read 20 times a second
(stackrace.evidence.kernel, `classify_thread`). A process of one thread needs no GIL
record: it holds the GIL whenever it runs. Every py-spy is started with the project's
die-with-parent preexec and stopped (SIGINT: it writes what it has) at the window's
end, killed if it does not go: none outlives the window, nor stackrace even when it is
SIGKILLed (tests/integration/test_why_catalogue.py).

**How a thread's stacks are put in states** (`classify_thread`):

- samples holding the GIL (from the GIL record): ON_CPU;
- a stack whose innermost app line calls `gc.collect`: GC;
- a stack waiting in threading's, queue's, logging's handler lock, concurrent.futures'
  or a pool's code, or on an app line that takes a lock (`acquire`, `with …lock`):
  LOCK_WAIT with app code on the stack, IDLE without (a server's thread parked on its
  task queue);
- a stack with no app code: the server's own: IDLE (waiting for a client or for work),
  or waiting for the GIL when runnable while another thread holds it;
- the app's other stacks share what is left of the thread's system calls, after the
  stacks above took theirs (a thread waiting on a lock 88 % of its samples and asleep
  11 % was asleep in its other stacks): runnable without the GIL while another thread
  holds it is GIL_WAIT (ON_CPU without a GIL record: native code); a futex while
  another thread holds the GIL half the time is GIL_WAIT, else LOCK_WAIT; a sleep, a
  socket or file call is BLOCKED; epoll, accept or select is BLOCKED too (the app
  called it) unless the innermost frame is an event loop's own (asyncio's selector, or
  its runner when uvloop waits in C): IDLE.

The app's code is every frame whose file is under one of the target's `app_roots`, or,
when none are given, any file outside the standard library and site-/dist-packages.
"""

from __future__ import annotations

import asyncio
import contextlib
import linecache
import math
import os
import re
import shutil
import signal
import sys
import sysconfig
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from stackrace.base.errors import StackraceError
from stackrace.evidence.kernel import IO, LOCKS, RUNNING, SLEEPS, WAITS_FOR_WORK
from stackrace.evidence.model import ThreadState
from stackrace.supervise.procs import die_with_parent

STOP_TIMEOUT = 1.5  # a record not gone this long after SIGINT is asked again, then killed

_STDLIB = tuple(
    {p for p in (sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("platstdlib")) if p}
)
_LIBRARY_PARTS = ("/site-packages/", "/dist-packages/", "/lib_pypy/", "<frozen ", "<string>")
_LOCKISH_FILES = (
    "threading.py", "queue.py", "/asyncio/locks.py", "/concurrent/futures/",
    "/logging/__init__.py",  # Handler.acquire: the handler's lock around emit
)  # fmt: skip
_LOCK_LINE = re.compile(r"\.acquire\(|\bwith\b.*\b(lock|mutex|sem|semaphore|cond)\w*\b", re.I)
_GC_LINE = re.compile(r"\bgc\.collect\(|\bcollect\(\s*\)")
_POOL = re.compile(r"pool", re.I)
_LOOP_FILES = ("/asyncio/", "/uvloop/", "/anyio/", "/trio/", "/tornado/ioloop")


def find_pyspy() -> str | None:
    """The py-spy executable: beside this Python (the venv's bin), or on PATH."""
    here = Path(sys.executable).parent / "py-spy"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    return shutil.which("py-spy")


@dataclass(frozen=True)
class Frame:
    function: str
    path: str  # the full file name
    line: int


@dataclass(frozen=True)
class ThreadSample:
    """A share of one thread's samples: one stack, in one state (`weight` samples: a
    stack's samples are split among states by the thread's system calls, see
    `classify_thread`)."""

    pid: int
    thread: int  # the OS thread id
    state: ThreadState
    frames: tuple[Frame, ...]  # innermost first
    app: int  # index of the innermost frame of app code, -1 none
    weight: float
    event_loop: bool  # the stack runs an event loop (asyncio, uvloop, anyio, tornado)
    pool: bool  # inside a pool's code (or an app function named for one)


class AppCode:
    """Which files are the app's own."""

    def __init__(self, roots: tuple[str, ...]) -> None:
        self.roots = tuple(os.path.realpath(r).rstrip("/") + "/" for r in roots if r)
        self._seen: dict[str, bool] = {}

    def __call__(self, path: str) -> bool:
        known = self._seen.get(path)
        if known is None:
            known = self._seen[path] = self._is_app(path)
        return known

    def _is_app(self, path: str) -> bool:
        if not path or any(part in path for part in _LIBRARY_PARTS):
            return False
        if self.roots:
            real = os.path.realpath(path)
            return any(real.startswith(r) for r in self.roots)
        return not any(path.startswith(s + "/") for s in _STDLIB)

    def short(self, path: str) -> str:
        """The file as short as still says which: relative to its app root, else the
        last two parts of its path ("app.py", "myapp/views.py")."""
        real = os.path.realpath(path)
        for root in self.roots:
            if real.startswith(root):
                return real[len(root) :]
        parts = Path(path).parts
        return "/".join(parts[-2:]) if len(parts) > 2 and not self.roots else Path(path).name


def _source_line(path: str, line: int) -> str:
    # app files only, read from disk once each (linecache); the text is matched, never shown
    try:
        return linecache.getline(path, line)[:400]
    except (OSError, UnicodeDecodeError, MemoryError):
        return ""


def _kind(frames: tuple[Frame, ...], is_app: AppCode) -> str:
    """What a stack alone says: "gc", "lock" (waiting in a lock's, a queue's, a pool's
    code, or on an app line taking a lock), "server" (no app code: the server's own
    work or wait), or "app" (the app's code, in a state its thread's system calls say)."""
    app = next((i for i, f in enumerate(frames) if is_app(f.path)), -1)
    if app >= 0 and _GC_LINE.search(_source_line(frames[app].path, frames[app].line)):
        return "gc"
    inner = frames[0] if frames else None
    if inner is not None and (
        any(part in inner.path for part in _LOCKISH_FILES)
        or _POOL.search(inner.function) is not None
        or (app == 0 and _LOCK_LINE.search(_source_line(inner.path, inner.line)) is not None)
    ):
        return "lock" if app >= 0 else "server"
    return "app" if app >= 0 else "server"


def classify_thread(
    pid: int,
    tid: int,
    stacks: dict[tuple[Frame, ...], int],
    calls: Counter[str],
    held: dict[tuple[Frame, ...], int] | None,
    others_held: float,
    is_app: AppCode,
) -> list[ThreadSample]:
    """One thread's samples over the window, each stack put in states (the module
    docstring gives the rules). `stacks`: its wall-clock samples; `calls`: its system
    calls over the rounds ("running" included); `held`: its samples holding the GIL,
    by stack (None: the GIL was not sampled); `others_held`: the share of samples in
    which another thread of its process held the GIL."""
    reads = sum(calls.values()) or 1
    total = sum(stacks.values()) or 1
    # the thread's reads as sample budgets, per kind of call
    budget: dict[str, float] = {
        "run": calls.get(RUNNING, 0),
        "futex": sum(n for c, n in calls.items() if c in LOCKS),
        "blocked": sum(n for c, n in calls.items() if c in SLEEPS or c in IO),
        "waiting": sum(n for c, n in calls.items() if c in WAITS_FOR_WORK),
    }
    budget["run"] += reads - sum(budget.values())  # unreadable or other calls: running
    budget = {k: v * total / reads for k, v in budget.items()}
    on_cpu = {frames: min(n, (held or {}).get(frames, 0)) for frames, n in stacks.items()}
    budget["run"] = max(0.0, budget["run"] - sum(on_cpu.values()))
    kinds = {frames: _kind(frames, is_app) for frames in stacks}
    # what the stacks alone account for uses up its kind of call first, so the app's
    # other stacks share what is left: a thread waiting on a lock 88 % of its samples
    # and asleep 11 % was asleep in its other stacks, not waiting there too
    for frames, n in stacks.items():
        rest: float = n - on_cpu[frames]
        for key in {"lock": ("futex",), "server": ("waiting", "blocked", "futex")}.get(
            kinds[frames], ()
        ):
            used = min(rest, budget[key])
            budget[key] -= used
            rest -= used
    left = sum(budget.values())
    shares = {k: v / left for k, v in budget.items()} if left > 0 else {"run": 1.0}
    # runnable without the GIL while another thread holds it: waiting to take it back
    # (without the GIL sampled: running is on CPU); asleep in a futex while another
    # thread holds it: the GIL's futex
    runnable = (
        ThreadState.GIL_WAIT if held is not None and others_held >= 0.3 else ThreadState.ON_CPU
    )
    futex = ThreadState.GIL_WAIT if others_held >= 0.5 else ThreadState.LOCK_WAIT
    out = []
    for frames, n in stacks.items():
        kind = kinds[frames]
        app = next((i for i, f in enumerate(frames) if is_app(f.path)), -1)
        loop = any(any(p in f.path for p in _LOOP_FILES) for f in frames)
        pool = any(_POOL.search(f.function) or _POOL.search(f.path) for f in frames)
        split: dict[ThreadState, float]
        if kind == "gc":
            split = {ThreadState.GC: 1.0}
        else:
            rest = (n - on_cpu[frames]) / n if n else 0.0  # of this stack's samples
            split = {ThreadState.ON_CPU: 1.0 - rest}
            if kind == "lock":
                split[ThreadState.LOCK_WAIT] = rest
            elif kind == "server":
                split[runnable] = split.get(runnable, 0.0) + rest * shares.get("run", 0.0)
                split[ThreadState.IDLE] = rest * (1.0 - shares.get("run", 0.0))
            else:
                inner = frames[0]
                # the loop's own wait: asyncio's selector, or (uvloop, waiting in C) the
                # loop's runner as the innermost Python frame, with the app's `asyncio.run`
                # below it; an app that calls epoll itself is its own innermost frame
                in_selector = not is_app(inner.path) and (
                    "selectors.py" in inner.path or any(p in inner.path for p in _LOOP_FILES)
                )
                waiting = shares.get("waiting", 0.0)
                for state, share in (
                    (runnable, shares.get("run", 0.0)),
                    (futex, shares.get("futex", 0.0)),
                    (ThreadState.BLOCKED, shares.get("blocked", 0.0)),
                    (ThreadState.IDLE if in_selector else ThreadState.BLOCKED, waiting),
                ):
                    split[state] = split.get(state, 0.0) + rest * share
        for state, share in split.items():
            if share > 0:
                out.append(
                    ThreadSample(pid, tid, state, frames, app, n * share, loop, pool and
                                 state is ThreadState.LOCK_WAIT)
                )  # fmt: skip
    return out


def budget_share(calls: Counter[str], call: str) -> float:
    """The share of a thread's reads in `call`."""
    return calls.get(call, 0) / (sum(calls.values()) or 1)


_FRAME = re.compile(r"^(.*) \((.*?)(?::(\d+))?\)$")
_THREAD = re.compile(r"^thread \((\d+)\)")


def parse_raw(text: str) -> dict[int, dict[tuple[Frame, ...], int]]:
    """`py-spy record --format raw --threads --full-filenames` output: for each OS
    thread id, its stacks (innermost frame first) and their samples. Lines it cannot
    read are skipped (the output is a worker's names: data, never trusted)."""
    out: dict[int, dict[tuple[Frame, ...], int]] = {}
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit() or not stack:
            continue
        parts = stack.split(";")
        m = _THREAD.match(parts[0])
        if m is None:
            continue
        frames = []
        for part in reversed(parts[1:]):
            f = _FRAME.match(part)
            if f is not None:
                frames.append(Frame(f[1][:200], f[2][:500], int(f[3] or 0)))
            else:
                frames.append(Frame(part[:200], "", 0))
        by_stack = out.setdefault(int(m[1]), {})
        key = tuple(frames)
        by_stack[key] = by_stack.get(key, 0) + int(count)
    return out


class PySpyError(StackraceError):
    """py-spy could not sample a process; the message is one line (with the fix, when
    it is `permanent`: the kernel refused, and every later dump would be refused too)."""

    def __init__(self, message: str, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


async def start_record(
    pyspy: str, pid: int, rate: int, seconds: float, out: Path, gil: bool = False
) -> asyncio.subprocess.Process:
    """A `py-spy record` of `pid` (wall-clock: idle threads too; non-blocking; each
    thread's OS id; full file names; `gil`: only the GIL's holder) writing raw
    collapsed stacks to `out` when it stops: at `stop_record`, or by itself when the
    window's whole seconds are over."""
    return await asyncio.create_subprocess_exec(
        pyspy, "record", "--pid", str(pid), "--rate", str(rate),
        "--duration", str(max(1, math.ceil(seconds))), "--format", "raw", "--output", str(out),
        "--gil" if gil else "--idle", "--threads", "--nonblocking", "--full-filenames",
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, preexec_fn=die_with_parent(),
    )  # fmt: skip


async def stop_record(proc: asyncio.subprocess.Process, pid: int, out: Path) -> str:
    """Stop a record (SIGINT: it writes what it has), and its raw output. Raises
    PySpyError when it could not sample (`permanent` when the kernel refused)."""
    err = b""
    try:
        # a SIGINT that comes while py-spy starts is lost: ask again once
        for _ in range(2):
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGINT)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(STOP_TIMEOUT):
                    _, err = await proc.communicate()
                break
    finally:  # still there (or the window cancelled): it goes now, with what it had
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(Exception):
                await asyncio.shield(proc.wait())
    try:
        text = out.read_text("utf-8", "replace")
    except OSError:
        text = ""
    if text:
        return text
    message = err.decode("utf-8", "replace")
    if "Permission denied" in message or "Operation not permitted" in message:
        raise PySpyError(permission_fix(pid), permanent=True)
    if not os.path.exists(f"/proc/{pid}"):
        return ""
    raise PySpyError(f"py-spy cannot read process {pid}: {_one_line(message)}")


def _one_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    line = next((ln for ln in lines if "rror" in ln), lines[-1] if lines else "no reason given")
    return "".join(c for c in line if c.isprintable())[:200]


def permission_fix(pid: int) -> str:
    """The one line said when the kernel refuses py-spy: why, and what to do."""
    try:
        scope = Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip()
    except OSError:
        scope = ""
    if scope in ("2", "3"):
        why = f"kernel.yama.ptrace_scope is {scope} (only an administrator may trace)"
        fix = "run stackrace where ptrace_scope is 0 or 1, or as root"
    elif scope == "1":
        # the launcher names stackrace the tracer of a stack's first process; a
        # preforking server's workers are not named (Yama keeps it per process)
        why = "kernel.yama.ptrace_scope is 1 and this worker does not name stackrace its tracer"
        fix = "run with kernel.yama.ptrace_scope=0, or as root"
    else:
        why = "ptrace is not permitted here (a container without CAP_SYS_PTRACE?)"
        fix = "run the container with --cap-add SYS_PTRACE"
    return f"py-spy cannot attach to process {pid}: {why}; {fix}"


def is_python(pid: int) -> bool:
    """A CPython or PyPy process: its executable, or a library it mapped, is Python's."""
    try:
        exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return False
    if exe.startswith(("python", "pypy")):
        return True
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            maps = f.read(1 << 20)
    except OSError:
        return False
    return b"libpython" in maps or b"libpypy" in maps
