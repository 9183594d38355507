"""Memory and CPU of each stack's whole process tree, sampled with psutil.

RSS summed over processes counts shared pages (the code of forked workers) once per
process; USS counts only what each process alone holds, and PSS shares the shared
pages out, so USS and PSS sums do not double-count. All three are reported.

CPU comes as a percentage of one core and as cumulative seconds (so a caller can divide
by the requests served: CPU time per request, the fairest figure when stacks share
cores), and `cpu_wait_percent` says how long the tree's processes were runnable but
waiting for a core (the scheduler's run-queue time of every thread, /proc/PID/task/
TID/schedstat): a stack
starved of CPU by its neighbours shows it there, not as a slow server.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stackrace.supervise.procs import parent_map

if TYPE_CHECKING:
    import psutil


@dataclass(frozen=True)
class ResourceSample:
    t: float  # time.monotonic()
    rss: int
    uss: int
    pss: int
    cpu_percent: float  # of one core, summed over the tree
    processes: int
    threads: int
    cpu_seconds: float = 0.0  # user + system since the sampler first saw each process
    cpu_wait_percent: float = 0.0  # runnable but waiting for a core, % of one core
    # processes of the tree gone since sampling began: a server that restarts its
    # workers (gunicorn after WORKER TIMEOUT, uWSGI's respawns) shows it here
    exited: int = 0


def _runq_wait_ns(pid: int, threads: int = 1) -> int:
    """Nanoseconds the process's threads spent waiting on a run queue. /proc/PID/
    schedstat is the main thread's alone: a Go server's goroutines run on other threads
    (its main thread sleeps), and read from there alone it seemed never to wait for a
    core on a core it waited for as much as its neighbours."""
    if threads <= 1:
        return _schedstat_wait(f"/proc/{pid}/schedstat")
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    return sum(_schedstat_wait(f"/proc/{pid}/task/{tid}/schedstat") for tid in tids)


def _schedstat_wait(path: str) -> int:
    try:
        with open(path, "rb") as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0


class TreeSampler:
    """Samples one set of processes (roots plus every descendant) again and again.

    Finding the descendants means reading every /proc/PID/stat on the machine (~1.5 ms),
    which costs more than sampling the stack itself (~0.2 ms a process); so the tree is
    found again only every `rescan_s` seconds, or at once when a known process is gone.
    """

    def __init__(self, roots: list[int] | None = None, rescan_s: float = 1.0) -> None:
        self.roots = list(roots or [])
        self.rescan_s = rescan_s
        self._procs: dict[int, psutil.Process] = {}
        self._scanned_at: float | None = None
        self._cpu: dict[int, float] = {}
        self._wait: dict[int, int] = {}
        self._cpu_first: dict[int, float] = {}  # each process's CPU when first seen
        self._cpu_gone = 0.0  # CPU of processes that have exited since
        self._exited = 0
        self._last_t: float | None = None
        self.before: ResourceSample | None = None
        self.after: ResourceSample | None = None
        self.latest: ResourceSample | None = None

    def _tree(self, now: float) -> list[psutil.Process]:
        # psutil is imported where a tree is sampled: `load` and `--help` never sample one,
        # and its import (~30 ms) would be paid at every start-up
        import psutil  # lazy: keeps start-up fast

        fresh = self._scanned_at is not None and now - self._scanned_at < self.rescan_s
        if fresh and all(p.is_running() for p in self._procs.values()):
            return list(self._procs.values())
        self._scanned_at = now
        children: dict[int, list[int]] = {}
        for pid, ppid in parent_map().items():
            children.setdefault(ppid, []).append(pid)
        found: dict[int, psutil.Process] = {}
        todo = list(self.roots)
        while todo:
            pid = todo.pop()
            if pid in found:
                continue
            try:
                # keep the Process objects: psutil checks their identity (start time)
                found[pid] = self._procs.get(pid) or psutil.Process(pid)
            except psutil.Error:
                continue
            todo.extend(children.get(pid, ()))
        self._procs = found
        return list(found.values())

    def sample(self) -> ResourceSample:
        import psutil  # here, not at the top: it keeps start-up fast (see _tree)

        now = time.monotonic()
        rss = uss = pss = threads = 0
        cpu_total = 0.0
        wait_total = 0
        cpu_now: dict[int, float] = {}
        wait_now: dict[int, int] = {}
        procs = self._tree(now)
        alive = 0
        for p in procs:
            try:
                with p.oneshot():
                    times = p.cpu_times()
                    n_threads = p.num_threads()
                    threads += n_threads
                    try:
                        full = p.memory_full_info()
                        rss += full.rss
                        uss += full.uss
                        pss += getattr(full, "pss", full.uss)
                    except psutil.AccessDenied:
                        info = p.memory_info()
                        rss += info.rss
                        uss += info.rss
                        pss += info.rss
            except psutil.Error:
                continue
            alive += 1
            used = times.user + times.system
            cpu_now[p.pid] = used
            waited = _runq_wait_ns(p.pid, n_threads)
            wait_now[p.pid] = waited
            if p.pid in self._cpu:
                cpu_total += max(0.0, used - self._cpu[p.pid])
                wait_total += max(0, waited - self._wait.get(p.pid, waited))
            else:
                self._cpu_first.setdefault(p.pid, used)
        for pid, last in self._cpu.items():
            if pid not in cpu_now:
                self._cpu_gone += last - self._cpu_first.pop(pid, last)
                self._exited += 1
        cpu_percent = wait_percent = 0.0
        if self._last_t is not None and now > self._last_t:
            cpu_percent = 100.0 * cpu_total / (now - self._last_t)
            wait_percent = 100.0 * wait_total / 1e9 / (now - self._last_t)
        self._cpu = cpu_now
        self._wait = wait_now
        self._last_t = now
        cpu_seconds = self._cpu_gone + sum(
            used - self._cpu_first.get(pid, used) for pid, used in cpu_now.items()
        )
        s = ResourceSample(
            now, rss, uss, pss, cpu_percent, alive, threads, cpu_seconds, wait_percent,
            self._exited,
        )  # fmt: skip
        self.latest = s
        return s

    def mark_before(self) -> ResourceSample:
        """Memory before load, as the classic posts reported it ("6.8 MB at start")."""
        self._scanned_at = None  # a figure that is kept: find the whole tree now
        self.before = self.sample()
        return self.before

    def mark_after(self) -> ResourceSample:
        self._scanned_at = None
        self.after = self.sample()
        return self.after
