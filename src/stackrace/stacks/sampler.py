"""Memory and CPU of each stack's whole process tree, sampled with psutil.

RSS summed over processes counts shared pages (the code of forked workers) once per
process; USS counts only what each process alone holds, and PSS shares the shared
pages out, so USS and PSS sums do not double-count. All three are reported.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

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


class TreeSampler:
    """Samples one set of processes (roots plus every descendant) again and again."""

    def __init__(self, roots: list[int] | None = None) -> None:
        self.roots = list(roots or [])
        self._procs: dict[int, psutil.Process] = {}
        self._cpu: dict[int, float] = {}
        self._last_t: float | None = None
        self.before: ResourceSample | None = None
        self.after: ResourceSample | None = None
        self.latest: ResourceSample | None = None

    def _tree(self) -> list[psutil.Process]:
        found: dict[int, psutil.Process] = {}
        for pid in self.roots:
            try:
                root = self._procs.get(pid) or psutil.Process(pid)
                found[pid] = root
                for child in root.children(recursive=True):
                    found[child.pid] = self._procs.get(child.pid, child)
            except psutil.Error:
                continue
        self._procs = found
        return list(found.values())

    def sample(self) -> ResourceSample:
        now = time.monotonic()
        rss = uss = pss = threads = 0
        cpu_total = 0.0
        cpu_now: dict[int, float] = {}
        procs = self._tree()
        alive = 0
        for p in procs:
            try:
                with p.oneshot():
                    times = p.cpu_times()
                    threads += p.num_threads()
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
            if p.pid in self._cpu:
                cpu_total += max(0.0, used - self._cpu[p.pid])
        cpu_percent = 0.0
        if self._last_t is not None and now > self._last_t:
            cpu_percent = 100.0 * cpu_total / (now - self._last_t)
        self._cpu = cpu_now
        self._last_t = now
        s = ResourceSample(now, rss, uss, pss, cpu_percent, alive, threads)
        self.latest = s
        return s

    def mark_before(self) -> ResourceSample:
        """Memory before load, as the classic posts reported it ("6.8 MB at start")."""
        self.before = self.sample()
        return self.before

    def mark_after(self) -> ResourceSample:
        self.after = self.sample()
        return self.after
