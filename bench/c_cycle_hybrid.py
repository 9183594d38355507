#!/usr/bin/env python3
"""A prototype's cost: the connection cycle in C, each answer counted in Python.

    python bench/c_cycle_hybrid.py PORT CONNECTIONS SECONDS [batch]

connect_rate.py runs it as two rows. It builds c_cycle_hybrid.c (once; again when it
changes) as an extension module and loads the Go target with it: C makes the engine's
six system calls per connection, and every answer is counted by a Python function that
does what the engine's response callback does (engine/connection.py
`on_message_complete`: bytes, requests, the last answer's time, the latency histogram's
bucket, HTTP errors by status, the next request sent). `batch` counts a whole epoll batch
per call instead. What it answers: whether "C does the I/O, Python keeps the accounting
in one place" can reach wrk's cost per connection, before anyone builds it.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from stackrace.engine.histogram import (  # noqa: E402  (after the path)
    COUNTS_LEN,
    HIGHEST,
    SUB_BUCKET_COUNT_MAGNITUDE,
    SUB_BUCKET_HALF_COUNT_MAGNITUDE,
    SUB_BUCKET_MASK,
)


def build() -> Path:
    src = ROOT / "bench" / "c_cycle_hybrid.c"
    out = ROOT / ".stackrace" / "bench" / f"c_cycle_hybrid{sysconfig.get_config_var('EXT_SUFFIX')}"
    out.parent.mkdir(parents=True, exist_ok=True)
    newest = max(p.stat().st_mtime for p in (src, src.with_name("c_cycle.h")))
    if not out.exists() or out.stat().st_mtime < newest:
        include = sysconfig.get_paths()["include"]
        cmd = ["cc", "-O2", "-shared", "-fPIC", f"-I{include}", "-o", str(out), str(src)]
        subprocess.run(cmd, check=True)
    return out


class Counts:
    """The target's counters the response callback touches (engine/target.py)."""

    def __init__(self) -> None:
        self.bytes = self.requests = self.sent = self.last_done = 0
        self.counts = [0] * COUNTS_LEN
        self.status: dict[int, int] = {}
        self.failures: dict[str, int] = {}


def main() -> None:
    port, conns, secs = (int(a) for a in sys.argv[1:4])
    batch = sys.argv[4:] == ["batch"]
    spec = importlib.util.spec_from_file_location("c_cycle_hybrid", build())
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    t = Counts()
    counts = t.counts
    top, mask = HIGHEST, SUB_BUCKET_MASK
    mag, half = SUB_BUCKET_COUNT_MAGNITUDE, SUB_BUCKET_HALF_COUNT_MAGNITUDE

    def on_answer(status: int, now: int, start: int, nbytes: int) -> None:
        t.bytes += nbytes
        t.requests += 1
        t.last_done = now
        lat = (now - start) // 1000
        if lat > top:
            lat = top
        b = (lat | mask).bit_length() - mag
        counts[(b << half) + (lat >> b)] += 1
        if status >= 300:
            t.status[status] = t.status.get(status, 0) + 1
            if status >= 400:
                t.failures["http_status"] = t.failures.get("http_status", 0) + 1
        t.sent += 1

    def on_batch(statuses: list[int], lats: list[int], sizes: list[int]) -> None:
        t.bytes += sum(sizes)
        t.requests += len(lats)
        t.sent += len(lats)
        for lat in lats:
            if lat > top:
                lat = top
            b = (lat | mask).bit_length() - mag
            counts[(b << half) + (lat >> b)] += 1
        for status in statuses:
            if status >= 300:
                t.status[status] = t.status.get(status, 0) + 1

    answers = mod.run(port, conns, secs, on_batch if batch else on_answer, batch)
    assert answers == t.requests == sum(counts), (answers, t.requests)
    print(f"{answers} answers")


if __name__ == "__main__":
    main()
