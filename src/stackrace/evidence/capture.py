"""Capture one evidence window of one stack while the load goes on.

`capture_window(target, stack=, level=, seconds=)` runs for `seconds`:

- for every Python process of the stack's tree, two `py-spy record`s (wall-clock and
  GIL, non-blocking) for the whole window (stackrace.evidence.pyspy); a manager whose
  children serve (gunicorn's arbiter, uvicorn's supervisor) is not sampled: it runs no
  app code; a worker born during the window is recorded from then on;
- twenty rounds a second, for every process whatever its language, each thread's
  system call and the wait channel (stackrace.evidence.kernel): they put a Python
  thread's stacks in states, and they are all the evidence there is for Go, Node,
  nginx, PHP-FPM or uWSGI's C core;
- four times a second, the listening port's accept queue (stackrace.stacks.listen);
- once a second, the process tree again: a worker that exited while another was born
  is a restart.

Around the window: every process's CPU and wait for a core, the machine's listen
overflows and drops, the stack's status page, its log's worker exits, its connections
to the database. The rounds are paced by `clock` (the caller's race clock) and asyncio's
sleep; the blocking reads (the socket table, the status page) run in a thread. What it
costs the stack is measured by bench/why_cost.py.

Where py-spy is missing or may not attach, the window says so in one line with the fix
(`not_sampled`), and everything the kernel knows is still there.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from stackrace.evidence.kernel import (
    ProcessWatch,
    connections_to,
    listen_counters,
    threads_of,
)
from stackrace.evidence.model import (
    EvidenceWindow,
    FrameShare,
    ProcessEvidence,
    QueueEvidence,
    ThreadState,
)
from stackrace.evidence.pyspy import (
    AppCode,
    PySpyError,
    ThreadSample,
    classify_thread,
    find_pyspy,
    is_python,
    parse_raw,
    start_record,
    stop_record,
)
from stackrace.evidence.status import read_status
from stackrace.stacks.listen import listen_states
from stackrace.stacks.logwatch import LogWatch
from stackrace.supervise.sweep import descendants

SAMPLE_RATE = 30  # py-spy samples a second of each Python process (90 in a 3 s window)
KERNEL_RATE = 20.0  # rounds of the threads' system calls a second (~20 µs a process)
# the accept queue is read every this many rounds (4 a second): one netlink dump of the
# machine's sockets costs ~2.5 ms of CPU on a machine holding many
QUEUE_EVERY = 5
RESCAN_S = 1.0  # how often the process tree is found again (a pass over all of /proc)
MAX_COLLAPSED = 2000  # distinct stacks kept for the flame graph; the rest are "(other)"
_K = TypeVar("_K")
_EXIT_SIGNS = ("WORKER TIMEOUT", "worker respawned", "child exited")


@dataclass(frozen=True)
class CaptureTarget:
    """What to capture: a stack's process tree and its port, and what else it has.

    `root_pid` 0: the server was not started by stackrace (`--url`), so only its port
    and status page can be read. `app_roots`: the directories of the app's own code
    (empty: anything outside the standard library and site-packages). `log_exits`:
    worker exits the caller already counted in the stack's log during the window
    (added to the restarts seen; `log_path` lets the capture count them itself)."""

    root_pid: int
    port: int | None
    app_roots: tuple[str, ...] = ()
    status_url: str | None = None
    db_pool: int | None = None
    log_exits: int = 0
    log_path: str | None = None
    db_port: int | None = None  # the database's port: the app's connections to it
    # a stack started as several processes (PHP-FPM beside nginx): the others' pids
    other_roots: tuple[int, ...] = ()
    sample: bool = True  # False: the kernel side only (no py-spy)
    not_sampled: str = ""  # why not, when the caller knows ("started with --url: …")

    @property
    def roots(self) -> tuple[int, ...]:
        return (self.root_pid, *self.other_roots)


@dataclass
class _Rounds:
    """What the rounds gathered."""

    # pid → py-spy's raw output, wall-clock; -pid → the GIL's
    raw: dict[int, str] = field(default_factory=dict)
    depths: list[int] = field(default_factory=list)
    limit: int | None = None
    initial: set[int] = field(default_factory=set)  # the tree's pids when it began
    seen: set[int] = field(default_factory=set)  # every pid of the tree seen
    gone: set[int] = field(default_factory=set)  # … and seen no more
    not_sampled: str = ""
    failed: str = ""  # the last record that failed (not for lack of permission)
    python: bool = False  # a Python process was in the tree
    is_python: dict[int, bool] = field(default_factory=dict)  # pid → a Python process
    rounds: int = 0


def _tree(roots: tuple[int, ...]) -> list[int]:
    """The roots that live (the first first), then all their descendants."""
    live = [r for r in roots if r > 0 and os.path.exists(f"/proc/{r}")]
    if not live:
        return []
    return [*live, *sorted(descendants(live) - set(live))]


def _sampled_pids(tree: list[int], known: dict[int, bool]) -> list[int]:
    for pid in tree:
        if pid not in known:
            known[pid] = is_python(pid)  # reads its maps: once per process
    python = [p for p in tree if known[p]]
    # the root manages when Python children serve: it runs no app code
    if len(python) > 1 and tree and python[0] == tree[0]:
        return python[1:]
    return python


async def capture_window(
    target: CaptureTarget,
    *,
    stack: str,
    level: int,
    seconds: float = 3.0,
    clock: Callable[[], float] = time.monotonic,
) -> EvidenceWindow:
    """Sample `target` for `seconds` while its load goes on; the evidence window."""
    started = clock()
    pyspy = find_pyspy() if target.sample else None
    g = _Rounds()
    if target.not_sampled:
        g.not_sampled = target.not_sampled
    elif not target.sample:
        g.not_sampled = "sampling was turned off"
    elif pyspy is None:
        g.not_sampled = "py-spy is not installed (pip install py-spy)"
    elif target.root_pid <= 0:
        g.not_sampled = (
            "the server was not started by stackrace (--url): its processes are unknown; "
            "start it from stackrace to sample its workers"
        )
    is_app = AppCode(target.app_roots)
    tree = _tree(target.roots)
    watches = {pid: ProcessWatch.start(pid) for pid in tree}
    g.seen.update(tree)
    g.initial.update(tree)
    sampled = _sampled_pids(tree, g.is_python)
    g.python = bool(sampled)
    overflows0 = listen_counters()
    log = LogWatch(target.log_path, from_start=False) if target.log_path else None
    log0 = _exits(log)
    with tempfile.TemporaryDirectory(prefix="stackrace-why-") as tmp:
        records: dict[int, tuple[asyncio.subprocess.Process, Path]] = {}
        try:
            await _record_new(pyspy, sampled, records, Path(tmp), seconds, g)
            last_scan = clock()
            while clock() - started < seconds:
                if clock() - last_scan >= RESCAN_S:
                    last_scan = clock()
                    tree, sampled = _rescan(target.roots, watches, g)
                    await _record_new(pyspy, sampled, records, Path(tmp), seconds, g)
                for watch in watches.values():
                    if not watch.gone:
                        watch.read()
                if target.port and g.rounds % QUEUE_EVERY == 0:
                    state = (await asyncio.to_thread(listen_states, [target.port]))[target.port]
                    g.depths.append(state.accept_queue)
                    if state.backlog is not None:
                        g.limit = state.backlog
                g.rounds += 1
                pause = started + g.rounds / KERNEL_RATE - clock()
                if pause > 0:
                    await asyncio.sleep(min(pause, max(0.0, started + seconds - clock())))
            # the window's end: CPU and core waits read now, not after py-spy stopped
            elapsed = max(1e-3, clock() - started)
            tree, _ = _rescan(target.roots, watches, g)  # the last exits count too
            for w in watches.values():
                w.finish()
        finally:
            await _stop_records(records, g)
    overflows1 = listen_counters()
    source, figures = "", dict[str, float]()
    if target.status_url:
        source, figures = await asyncio.to_thread(read_status, target.status_url)
    db_connections = None
    if target.db_port:
        db_connections = await asyncio.to_thread(connections_to, tree, target.db_port)
    restarts = _restarts(target.roots, g)
    if watches and not g.python and not g.not_sampled:
        names = ", ".join(sorted({w.name for w in watches.values() if w.name}))
        g.not_sampled = f"not a Python process ({names}): its stacks cannot be sampled"
    restarts = max(restarts, target.log_exits, _exits(log) - log0)
    return _window(
        target, stack, level, started, elapsed, g, watches, is_app,
        queue=_queue(g, overflows0, overflows1) if target.port else None,
        status=(source, figures), db_connections=db_connections, restarts=restarts,
    )  # fmt: skip


def _exits(log: LogWatch | None) -> int:
    if log is None:
        return 0
    counts = log.poll()
    return sum(counts.get(sign, 0) for sign in _EXIT_SIGNS)


def _rescan(
    roots: tuple[int, ...], watches: dict[int, ProcessWatch], g: _Rounds
) -> tuple[list[int], list[int]]:
    tree = _tree(roots)
    for pid in tree:
        if pid not in watches:
            watches[pid] = ProcessWatch.start(pid)
    g.gone.update(g.seen - set(tree))
    g.seen.update(tree)
    sampled = _sampled_pids(tree, g.is_python)
    g.python = g.python or bool(sampled)
    return tree, sampled


def _restarts(roots: tuple[int, ...], g: _Rounds) -> int:
    """Workers that exited in the window while others were born: replaced (a root is
    the stack, not a worker: its exit is a crash, said elsewhere)."""
    gone = g.gone - set(roots)
    born = g.seen - g.initial
    return min(len(gone), len(born))


async def _record_new(
    pyspy: str | None,
    sampled: list[int],
    records: dict[int, tuple[asyncio.subprocess.Process, Path]],
    tmp: Path,
    seconds: float,
    g: _Rounds,
) -> None:
    """A py-spy record for each Python process not recorded yet (a worker born in the
    window is recorded from then on)."""
    if pyspy is None or g.not_sampled:
        return
    for pid in sampled:
        if pid not in records:
            # wall-clock (every thread, idle or not) and GIL (only its holder) at once;
            # a process of one thread holds the GIL whenever it runs: no GIL record
            threads = len(threads_of(pid))
            for gil in (False, True) if threads > 1 else (False,):
                out = tmp / f"{pid}{'-gil' if gil else ''}.txt"
                try:
                    proc = await start_record(pyspy, pid, SAMPLE_RATE, seconds, out, gil=gil)
                except OSError as exc:  # py-spy gone or not executable since it was found
                    g.not_sampled = f"py-spy could not start: {exc.strerror or exc}"
                    return
                records[-pid if gil else pid] = (proc, out)


async def _stop_records(
    records: dict[int, tuple[asyncio.subprocess.Process, Path]], g: _Rounds
) -> None:
    async def one(pid: int, proc: asyncio.subprocess.Process, out: Path) -> None:
        try:
            g.raw[pid] = await stop_record(proc, abs(pid), out)
        except PySpyError as exc:
            # a permission refused says so with its fix; any other failure (a worker
            # killed mid-window) is a process without samples, said only when no
            # process had any
            if exc.permanent:
                g.not_sampled = str(exc)
            else:
                g.failed = str(exc)

    await asyncio.gather(*(one(pid, proc, out) for pid, (proc, out) in records.items()))


def _samples(g: _Rounds, watches: dict[int, ProcessWatch], is_app: AppCode) -> list[ThreadSample]:
    """Every thread's stacks, put in states with its own system calls and the GIL."""
    out: list[ThreadSample] = []
    for pid, text in g.raw.items():
        watch = watches.get(pid)
        if pid < 0 or watch is None:
            continue
        wall = parse_raw(text)
        gil = parse_raw(g.raw[-pid]) if g.raw.get(-pid) else None
        rounds = max((sum(stacks.values()) for stacks in wall.values()), default=1)
        held = {tid: sum(stacks.values()) for tid, stacks in (gil or {}).items()}
        for tid, stacks in wall.items():
            calls = watch.per_thread.get(tid, Counter())
            if gil is not None:
                others = (sum(held.values()) - held.get(tid, 0)) / rounds
            else:  # without the GIL sampled: another thread running holds it, likely
                others = watch.others_running.get(tid, 0) / max(1, sum(calls.values()))
            mine = gil.get(tid, {}) if gil is not None else None
            out.extend(classify_thread(pid, tid, stacks, calls, mine, others, is_app))
    return out


def _queue(g: _Rounds, before: tuple[int, int], after: tuple[int, int]) -> QueueEvidence:
    depths = g.depths or [0]
    return QueueEvidence(
        depth_max=max(depths),
        depth_mean=sum(depths) / len(depths),
        limit=g.limit,
        overflows=max(0, after[0] - before[0]),
        drops=max(0, after[1] - before[1]),
    )


def _serving(samples: list[ThreadSample]) -> list[ThreadSample]:
    """The samples of the threads that ran the app's code in the window (all, when none
    did: a server whose app code is not Python, or that was idle)."""
    threads = {(s.pid, s.thread) for s in samples if s.app >= 0}
    return [s for s in samples if (s.pid, s.thread) in threads] if threads else samples


def _window(
    target: CaptureTarget,
    stack: str,
    level: int,
    started: float,
    elapsed: float,
    g: _Rounds,
    watches: dict[int, ProcessWatch],
    is_app: AppCode,
    *,
    queue: QueueEvidence | None,
    status: tuple[str, dict[str, float]],
    db_connections: int | None,
    restarts: int,
) -> EvidenceWindow:
    serving = _serving(_samples(g, watches, is_app))
    total = round(sum(s.weight for s in serving))
    states: dict[str, float] = defaultdict(float)
    for sample in serving:
        states[sample.state.value] += sample.weight
    kernel: Counter[str] = Counter()
    for w in watches.values():
        kernel.update(w.states)
    return EvidenceWindow(
        stack=stack,
        level=level,
        started=started,
        seconds=elapsed,
        sampled=bool(serving),
        not_sampled="" if serving else (g.not_sampled or g.failed or "no Python thread seen"),
        samples=total,
        threads=len({(s.pid, s.thread) for s in serving}),
        states={k: round(v) for k, v in states.items() if round(v) > 0},
        frames=_app_frames(serving, total, is_app),
        processes=tuple(
            ProcessEvidence(
                pid=w.pid,
                name=w.name,
                threads=w.threads,
                cpu_share=round(w.cpu_share(elapsed), 3),
                core_wait_share=round(w.core_wait_share(elapsed), 3),
                wchan=ProcessWatch.most(w.wchans),
                syscall=ProcessWatch.most(w.syscalls),
            )
            for w in watches.values()
            if not w.gone
        ),
        queue=queue,
        status=status[1],
        status_source=status[0],
        db_connections=db_connections,
        db_pool=target.db_pool,
        restarts=restarts,
        collapsed=_collapsed(serving, is_app),
        workers=len({s.pid for s in serving if s.app >= 0}),
        event_loop=total > 0 and sum(s.weight for s in serving if s.event_loop) * 2 >= total,
        waits=_waits(serving, total, is_app),
        pool_waits=round(sum(s.weight for s in serving if s.pool)),
        kernel_states=dict(kernel),
        cores=_cores(target.root_pid),
        rounds=g.rounds,
    )


def _most(weights: dict[int, float]) -> int:
    return max(weights.items(), key=lambda kv: kv[1])[0]


def _top_items(weights: dict[_K, float], n: int) -> list[tuple[_K, float]]:
    return sorted(weights.items(), key=lambda kv: -kv[1])[:n]


def _cores(root: int) -> int:
    try:
        return len(os.sched_getaffinity(root if root > 0 else 0))
    except OSError:
        return os.cpu_count() or 1


def _app_frames(samples: list[ThreadSample], total: int, is_app: AppCode) -> tuple[FrameShare, ...]:
    """The app's functions (the innermost app frame of each sample), by state, most
    samples first; each at the line it was seen on most."""
    counts: dict[tuple[str, str, ThreadState], float] = defaultdict(float)
    lines: dict[tuple[str, str, ThreadState], dict[int, float]] = {}
    for s in samples:
        if s.app < 0:
            continue
        f = s.frames[s.app]
        key = (f.function, f.path, s.state)
        counts[key] += s.weight
        at = lines.setdefault(key, defaultdict(float))
        at[f.line] += s.weight
    return tuple(
        FrameShare(
            function=fn,
            file=is_app.short(path),
            line=_most(lines[(fn, path, state)]),
            samples=round(n),
            share=n / total if total else 0.0,
            state=state,
        )
        for (fn, path, state), n in _top_items(counts, 20)
        if round(n) > 0
    )


def _waits(samples: list[ThreadSample], total: int, is_app: AppCode) -> tuple[FrameShare, ...]:
    """Where the waiting threads wait: the innermost frame of any code."""
    counts: dict[tuple[str, str, int, ThreadState], float] = defaultdict(float)
    for s in samples:
        if s.state in (ThreadState.LOCK_WAIT, ThreadState.BLOCKED) and s.frames:
            f = s.frames[0]
            counts[(f.function, f.path, f.line, s.state)] += s.weight
    return tuple(
        FrameShare(
            fn, _library_short(path, is_app), line, round(n), n / total if total else 0.0, st
        )
        for (fn, path, line, st), n in _top_items(counts, 8)
        if round(n) > 0
    )


def _library_short(path: str, is_app: AppCode) -> str:
    if is_app(path):
        return is_app.short(path)
    parts = Path(path).parts
    return "/".join(parts[-2:]) if parts[-1] == "__init__.py" else parts[-1] if parts else path


def _collapsed(samples: list[ThreadSample], is_app: AppCode) -> dict[str, int]:
    """Collapsed stacks (root first, "file:function" frames, the state as the leaf)."""
    weights: dict[str, float] = defaultdict(float)
    for s in samples:
        frames = ";".join(
            f"{_library_short(f.path, is_app)}:{f.function}" for f in reversed(s.frames)
        )
        weights[f"{frames};[{s.state.value}]" if frames else f"[{s.state.value}]"] += s.weight
    counts = Counter({k: round(v) for k, v in weights.items() if round(v) > 0})
    if len(counts) <= MAX_COLLAPSED:
        return dict(counts)
    kept = dict(counts.most_common(MAX_COLLAPSED - 1))
    kept["(other)"] = sum(counts.values()) - sum(kept.values())
    return kept
