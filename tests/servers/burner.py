"""A CPU burner: a share of each core busy, as a build or a browser keeps a dev box.

    python tests/servers/burner.py [--share 0.3] [--seconds 600] [--cores 0,1]

One process per core, pinned to it, burns `share` of every 100 ms and sleeps the rest;
all of them end after `--seconds` (bounded: a burner left behind would be noise for
everyone), or at SIGTERM. The tune test runs one beside the search; docs/tune.md's
walk runs it by hand."""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import sys
import time


def burn(core: int, share: float, until: float) -> None:
    # the burner killed (even by SIGKILL): its children go too (PR_SET_PDEATHSIG); by
    # hand, so that any Python runs this file
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)
    os.sched_setaffinity(0, [core])
    while time.monotonic() < until:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 0.1 * share:
            pass
        time.sleep(max(0.0, 0.1 * (1 - share)))
    os._exit(0)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--share", type=float, default=0.3)
    p.add_argument("--seconds", type=float, default=600.0)
    p.add_argument("--cores", default="")
    a = p.parse_args()
    cores = [int(c) for c in a.cores.split(",")] if a.cores else sorted(os.sched_getaffinity(0))
    until = time.monotonic() + a.seconds
    kids = []
    for core in cores:
        pid = os.fork()
        if pid == 0:
            burn(core, a.share, until)
        kids.append(pid)

    def stop(*_: object) -> None:
        for pid in kids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        # reaped, not left to init: their CPU then counts in the rusage of whoever waits
        # for the burner (`/usr/bin/time pytest`), where it was missing: the burner's
        # ~0.6 core for the whole tune beside it was the test's largest cost, unseen
        for pid in kids:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("burning", flush=True)
    for pid in kids:
        os.waitpid(pid, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
