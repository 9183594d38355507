"""A Python worker's threads, sampled with py-spy without stopping them, each sample put
in one `ThreadState`.

**Why `py-spy dump --json --nonblocking` at a rate, and not `py-spy record`.** `record`
writes counts of stacks only: whether a thread held the GIL or was running is lost
(its `--gil` and `--idle` flags filter samples, they do not mark them). A dump gives,
for every thread of one instant, its frames, whether the OS had it running (`active`)
and whether it held the GIL (`owns_gil`); read at the same instant, the thread's
system call (stackrace.evidence.kernel) says what an inactive thread sleeps in. A dump
costs a few milliseconds of one short process (measured: under 10 ms wall, ~0 ms of
the worker's CPU, in non-blocking mode the worker is never paused), so ten rounds a
second over a few seconds stay well under the 3 % budget (bench/why_cost.py). Every
py-spy process is started with the project's die-with-parent preexec and killed at
its timeout: none outlives the window, nor stackrace even when it is SIGKILLed.

**How a sample is classified** (`classify`), in this order:

- the innermost frame of app code is on a line that calls `gc.collect`: GC;
- runnable (on a core or waiting for one): ON_CPU when it holds the GIL, or no other
  thread does, or it is in a call that releases the GIL (a socket write, a hash);
  otherwise GIL_WAIT (a Python thread runnable without the GIL is taking it back);
- asleep in a futex: when the innermost frame is in threading, queue, logging's handler
  lock, concurrent.futures or a pool's code, or on an app line that takes a lock
  (`acquire`, `with …lock`), or when no other thread holds the GIL (then the futex is
  not the GIL's): LOCK_WAIT with app code on the stack, IDLE without (a server's thread
  parked on its task queue); otherwise GIL_WAIT;
- asleep in any other call with no app code on the stack: IDLE (the server waiting for
  a client or for work: accept, select, a keep-alive read);
- asleep in a sleep, a socket or file call under app code: BLOCKED; in epoll, accept or
  select under app code: BLOCKED too (the app called it), unless the innermost frame is
  an event loop's own selector: IDLE.

The app's code is every frame whose file is under one of the target's `app_roots`, or,
when none are given, any file outside the standard library and site-/dist-packages.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import linecache
import os
import re
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackrace.evidence.kernel import IO, LOCKS, RUNNING, SLEEPS, WAITS_FOR_WORK
from stackrace.evidence.model import ThreadState
from stackrace.supervise.procs import die_with_parent

DUMP_TIMEOUT = 2.0  # a dump that takes longer is killed: the round goes without it

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
# calls that release the GIL while they work: a thread found running in one without the
# GIL is working, not waiting for it
_RELEASING = frozenset({
    "write", "send", "sendall", "sendto", "recv", "recv_into", "read", "readinto",
    "accept", "connect", "select", "poll", "sleep", "digest", "update", "compress",
})  # fmt: skip
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
    """One thread at one instant, classified."""

    pid: int
    thread: int  # py-spy's thread id (stable over the window)
    state: ThreadState
    frames: tuple[Frame, ...]  # innermost first
    app: int  # index of the innermost frame of app code, -1 none
    event_loop: bool  # the stack runs an event loop (asyncio, uvloop, anyio, tornado)
    pool: bool  # a lock wait inside a pool's code (or an app function named for one)


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


def _parse_frames(raw: Any) -> tuple[Frame, ...]:
    out = []
    for f in raw if isinstance(raw, list) else ():
        if not isinstance(f, dict):
            continue
        name, path, line = f.get("name"), f.get("filename"), f.get("line")
        if isinstance(name, str) and isinstance(path, str):
            out.append(Frame(name[:200], path[:500], line if isinstance(line, int) else 0))
    return tuple(out)


def classify(
    frames: tuple[Frame, ...],
    active: bool,
    owns_gil: bool,
    syscall: str,
    other_holds_gil: bool,
    is_app: AppCode,
) -> tuple[ThreadState, int]:
    """One thread's state at one instant (the module docstring gives the rules), and the
    index of its innermost app frame (-1 none)."""
    app = next((i for i, f in enumerate(frames) if is_app(f.path)), -1)
    inner = frames[0] if frames else None
    if app >= 0 and _GC_LINE.search(_source_line(frames[app].path, frames[app].line)):
        return ThreadState.GC, app
    if syscall == RUNNING or (syscall == "" and active):
        # runnable: on a core, or waiting for one. Without the GIL while another thread
        # holds it, a Python thread can only be taking the GIL back, unless it is in a
        # call that released it (a socket write, a hash)
        if owns_gil or not other_holds_gil or (inner and inner.function in _RELEASING):
            return ThreadState.ON_CPU, app
        return ThreadState.GIL_WAIT, app
    if syscall in LOCKS:
        lockish = inner is not None and (
            any(part in inner.path for part in _LOCKISH_FILES)
            or _POOL.search(inner.path + inner.function) is not None
            or (app == 0 and _LOCK_LINE.search(_source_line(inner.path, inner.line)) is not None)
        )
        if lockish or not other_holds_gil:
            # the server's own threads parked on a queue or lock wait for a task
            return (ThreadState.LOCK_WAIT if app >= 0 else ThreadState.IDLE), app
        return ThreadState.GIL_WAIT, app
    if app < 0:  # the server's code asleep in a call: waiting for a client or for work
        return ThreadState.IDLE, app
    if syscall in SLEEPS or syscall in IO:
        return ThreadState.BLOCKED, app
    if syscall in WAITS_FOR_WORK:
        if inner is not None and not is_app(inner.path) and "selectors.py" in inner.path:
            return ThreadState.IDLE, app
        return ThreadState.BLOCKED, app
    # unreadable or another call: py-spy's own word
    return (ThreadState.ON_CPU if active else ThreadState.BLOCKED), app


def parse_dump(
    text: bytes, syscalls: dict[int, str], is_app: AppCode, pid: int
) -> list[ThreadSample]:
    """The threads of one `py-spy dump --json` of process `pid`, classified with the
    system calls read at that instant (os thread id → name)."""
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError):
        return []
    if not isinstance(data, list):
        return []
    threads = [t for t in data if isinstance(t, dict)]
    holders = {t.get("thread_id") for t in threads if t.get("owns_gil") is True}
    out = []
    for t in threads:
        frames = _parse_frames(t.get("frames"))
        tid = t.get("os_thread_id")
        syscall = syscalls.get(tid, "") if isinstance(tid, int) else ""
        state, app = classify(
            frames,
            bool(t.get("active")),
            bool(t.get("owns_gil")),
            syscall,
            bool(holders - {t.get("thread_id")}),
            is_app,
        )
        thread = t.get("thread_id")
        out.append(
            ThreadSample(
                pid=pid,
                thread=thread if isinstance(thread, int) else 0,
                state=state,
                frames=frames,
                app=app,
                event_loop=any(any(p in f.path for p in _LOOP_FILES) for f in frames),
                pool=state is ThreadState.LOCK_WAIT
                and any(_POOL.search(f.function) or _POOL.search(f.path) for f in frames),
            )
        )
    return out


class PySpyError(Exception):
    """py-spy could not sample a process; the message is one line (with the fix, when
    it is `permanent`: the kernel refused, and every later dump would be refused too)."""

    def __init__(self, message: str, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


async def dump(pyspy: str, pid: int) -> bytes:
    """One non-blocking dump of `pid` as JSON. Raises PySpyError with one line (and the
    fix) when py-spy cannot attach; returns b"" when the process is gone or py-spy
    took too long."""
    proc = await asyncio.create_subprocess_exec(
        pyspy,
        "dump",
        "--json",
        "--nonblocking",
        "--pid",
        str(pid),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=die_with_parent(),
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), DUMP_TIMEOUT)
    except BaseException as exc:  # a timeout, or the window cancelled: py-spy goes now
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(Exception):
            await asyncio.shield(proc.wait())
        if isinstance(exc, TimeoutError):
            return b""
        raise
    if proc.returncode == 0:
        return out
    message = err.decode("utf-8", "replace")
    if "Permission denied" in message or "Operation not permitted" in message:
        raise PySpyError(permission_fix(pid), permanent=True)
    if not os.path.exists(f"/proc/{pid}"):
        return b""
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
        why = "kernel.yama.ptrace_scope is 1 and the worker does not name stackrace its tracer"
        fix = "start the stack from stackrace (not --url), or run with ptrace_scope 0"
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
