#!/usr/bin/env python3
"""Past the breaking point: what stackrace, wrk and ab each report, and what the server saw.

    .venv/bin/python bench/accounting_vs_wrk_ab.py [-c 1000] [--duration 10]

The server is tests/servers/one_at_a_time.py: one request at a time, 10 ms each, a
listen backlog of 4096, so about 95 answers a second and every other client queued —
the shape of one gunicorn sync worker with a slow backend. Each tool loads it in turn
at the same concurrency for the same time (the server is restarted between tools, so
no tool inherits another's queue). For each the script prints what the tool reported
(requests answered, failures, timeouts, anything still waiting) and what the server
read and answered in the end, once its queue has drained: the requests each tool sent
but did not account for are the difference.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "servers" / "one_at_a_time.py"
sys.path.insert(0, str(ROOT))

from tests.helpers import free_port  # noqa: E402


def start() -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        ["taskset", "-c", "0", sys.executable, str(SERVER), str(port)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    return proc, port


def server_count(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_count", timeout=120) as r:
        return json.loads(r.read())


def drained(port: int, settle: float = 2.0) -> dict:
    """The server's counts once nothing more arrives (its queue has been worked off)."""
    last = server_count(port)
    while True:
        time.sleep(settle)
        now = server_count(port)
        if now["read"] == last["read"]:
            now["accepted"] -= now["control"]  # the count requests themselves
            return now
        last = now


def run_stackrace(url: str, c: int, secs: int) -> str:
    out = subprocess.run(
        ["taskset", "-c", "1", sys.executable, "-m", "stackrace.cli", "load", url,
         "-c", str(c), "-d", f"{secs}s", "--json"],
        capture_output=True, text=True, cwd=ROOT,
    ).stdout  # fmt: skip
    a = json.loads(out)["accounting"]
    fails = json.loads(out)["total"]["failures"]
    return (
        f"sent {a['sent']:,}: {a['answered']:,} answered, {a['failed_no_answer']:,} failed"
        f"{' ' + str(fails) if fails else ''}, {a['waiting']:,} still waiting"
        f" (oldest {a['oldest_wait_us'] / 1e6:.1f}s)"
    )


def run_wrk(url: str, c: int, secs: int) -> str:
    out = subprocess.run(
        ["taskset", "-c", "1", "wrk", "-t1", f"-c{c}", f"-d{secs}s", url],
        capture_output=True, text=True,
    ).stdout  # fmt: skip
    n = re.search(r"(\d+) requests in", out)
    errs = re.search(r"Socket errors: (.*)", out)
    said = errs.group(1) if errs else "no socket errors"
    return f"{n.group(1) if n else '?'} requests; {said}"


def run_ab(url: str, c: int, secs: int) -> str:
    # ab without -n keeps going until -t; -s is its per-request timeout (30 s default)
    out = subprocess.run(
        ["taskset", "-c", "1", "ab", "-c", str(c), "-t", str(secs), "-n", "10000000", url],
        capture_output=True, text=True,
    ).stdout  # fmt: skip
    done = re.search(r"Complete requests:\s+(\d+)", out)
    failed = re.search(r"Failed requests:\s+(\d+)", out)
    return f"{done.group(1) if done else '?'} complete, {failed.group(1) if failed else '?'} failed"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-c", type=int, default=1000)
    parser.add_argument("--duration", type=int, default=10)
    args = parser.parse_args()
    tools = {"stackrace": run_stackrace}
    if shutil.which("wrk"):
        tools["wrk"] = run_wrk
    if shutil.which("ab"):
        tools["ab"] = run_ab
    print(f"one request at a time, 10 ms each; c={args.c}, {args.duration}s per tool\n")
    for name, run in tools.items():
        proc, port = start()
        try:
            print(f"{name}…", flush=True)
            said = run(f"http://127.0.0.1:{port}/hello", args.c, args.duration)
            print(f"{name:<10} reported: {said}", flush=True)
            seen = drained(port)
        finally:
            proc.kill()
            proc.wait()
        read, accepted = seen["read"], seen["accepted"]
        print(f"{'':<10} the server read {read:,} requests on {accepted:,} connections\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
