#!/usr/bin/env python3
"""Where a `stackrace load`'s CPU goes, window by window, beside wrk's: the driver
process and the engine process apart.

    .venv/bin/python bench/load_split.py [--seconds 20] [--window 5] [--rounds 3]

One local server (bench/target, as startup.py starts it: GOMAXPROCS=1, pinned to no
core) answers both tools. Each round runs, in a fresh order, `stackrace load URL -c 50
-d SECONDSs` and `wrk -t1 -c50 -dSECONDSs URL`, and reads every process's CPU (user +
system, from /proc, every 0.1 s) and the answers the server counted (/_count, read at
each window's end) in windows of `--window` seconds from the command's start. Printed:
for each window, the CPU µs per answered request of the driver, the engine, stackrace's
whole and wrk's, and the ratio of the two wholes — medians over the rounds (min–max).
The first window carries each tool's start; the later ones are the steady cost, so the
table shows what a fixed start and a per-second cost each add to a load of a given length
(startup.py's `--load` measures the whole process only).

The machine is shared: the spread says how much it moved; compare ratios of the same
rounds only. Needs: go (the target), wrk, psutil (a stackrace dependency).
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from startup import STACKRACE, start_target  # found through the path above

SAMPLE_EVERY = 0.1


def count(base: str) -> int:
    """Answers since the last read (the target resets its count per read)."""
    with urllib.request.urlopen(f"{base}/_count", timeout=5) as r:
        return int(r.read())


def cpu_of(procs: dict[int, psutil.Process], last: dict[int, float]) -> None:
    """The latest CPU seconds of every process of the tree, kept past its exit."""
    for pid, p in list(procs.items()):
        try:
            t = p.cpu_times()
            last[pid] = t.user + t.system
        except psutil.Error:
            procs.pop(pid)


def run_windows(argv: list[str], base: str, window: float) -> list[tuple[float, float, int]]:
    """(driver CPU-s, children's CPU-s, answers) per window of one command's run; the
    command's own process is the driver (wrk: the whole of it)."""
    count(base)  # zero the server's count
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = psutil.Process(proc.pid)
    procs: dict[int, psutil.Process] = {proc.pid: root}
    last: dict[int, float] = {}
    windows: list[tuple[float, float, int]] = []
    t0 = time.perf_counter()
    edge = window
    done = (0.0, 0.0)
    while proc.poll() is None:
        try:
            for child in root.children(recursive=True):
                procs.setdefault(child.pid, child)
        except psutil.Error:
            pass
        cpu_of(procs, last)
        if time.perf_counter() - t0 >= edge:
            driver = last.get(proc.pid, 0.0)
            others = sum(v for pid, v in last.items() if pid != proc.pid)
            windows.append((driver - done[0], others - done[1], count(base)))
            done = (driver, others)
            edge += window
        time.sleep(SAMPLE_EVERY)
    driver = last.get(proc.pid, 0.0)
    others = sum(v for pid, v in last.items() if pid != proc.pid)
    tail = (driver - done[0], others - done[1], count(base))
    if windows and tail[2] < windows[-1][2] / 4:
        # the end's few answers and its summary belong to the last window, not a new one
        d, o, n = windows.pop()
        tail = (d + tail[0], o + tail[1], n + tail[2])
    windows.append(tail)
    return windows


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):6.2f} ({min(values):.2f}–{max(values):.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=20, help="each load's length")
    ap.add_argument("--window", type=float, default=5.0, help="seconds a window")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=50)
    args = ap.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (apt-get install wrk)")
    target, url = start_target()
    base = url.rsplit("/", 1)[0]
    c = str(args.connections)
    tools = {
        "stackrace": [STACKRACE, "load", url, "-c", c, "-d", f"{args.seconds}s"],
        "wrk": ["wrk", "-t1", f"-c{c}", f"-d{args.seconds}s", url],
    }
    # per tool, per window: the rounds' (driver, engine, whole) µs a request
    got: dict[str, list[list[tuple[float, float, float]]]] = {t: [] for t in tools}
    try:
        for r in range(args.rounds):
            order = list(tools)
            random.shuffle(order)
            for tool in order:
                for i, (d, o, n) in enumerate(run_windows(tools[tool], base, args.window)):
                    per = 1e6 / max(n, 1)
                    while len(got[tool]) <= i:
                        got[tool].append([])
                    got[tool][i].append((d * per, o * per, (d + o) * per))
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    finally:
        target.kill()
    print(
        f"{args.seconds} s at c={args.connections}, {args.rounds} interleaved rounds, "
        f"{args.window:g} s windows: CPU µs per answered request, median (min–max)"
    )
    print(
        f"{'window':>8}  {'driver':>18}  {'engine':>18}  {'stackrace':>18}  {'wrk':>18}"
        f"  {'ratio':>18}"
    )
    for i in range(min(len(got["stackrace"]), len(got["wrk"]))):
        s, w = got["stackrace"][i], got["wrk"][i]
        ratios = [a[2] / b[2] for a, b in zip(s, w, strict=False) if b[2]]
        label = f"{i * args.window:g}–{(i + 1) * args.window:g}s"
        print(
            f"{label:>8}  {spread([x[0] for x in s]):>18}  {spread([x[1] for x in s]):>18}"
            f"  {spread([x[2] for x in s]):>18}  {spread([x[2] for x in w]):>18}"
            f"  {spread(ratios) if ratios else '-':>18}"
        )


if __name__ == "__main__":
    main()
