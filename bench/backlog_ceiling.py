#!/usr/bin/env python3
"""Why did gunicorn sync "die near 130 clients" in 2012? The listen backlog.

    .venv/bin/python bench/backlog_ceiling.py [-c 100,130,170,300] [--backlogs 128,2048]

Experiment 002 saw one gunicorn sync process serve hello world until about 130
concurrent clients and then "die": no answer until the client timed out. Today the same
server never fails at c=1000 (presets/seed-002-concurrency-ceilings.toml). One difference
is the kernel: until Linux 5.4 `net.core.somaxconn` was 128, and it caps every listen
backlog, whatever gunicorn asks for (2048); Debian 12 has 4096. A sync worker holds one
connection, so the clients it can keep waiting are about the backlog; past it the kernel
drops SYNs, the client retransmits after 1 s, 3 s, 7 s..., and a client with a timeout
sees a dead server.

This starts gunicorn's sync worker (the hello app, one process, core 0) with each
`--backlog` in turn and loads it with `stackrace load` (core 1, new connection per
request as the experiment's `ab` did) at each concurrency, printing what stackrace
reports: req/s, answers, failures by kind, waiting, and the worst latency.
Needs: the gunicorn stack installed (./dev test sets it up), taskset.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helpers import free_port  # noqa: E402

VENV_BIN = ROOT / ".venv" / "bin"


def start(backlog: int) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        ["taskset", "-c", "0", str(VENV_BIN / "gunicorn"), "--bind", f"127.0.0.1:{port}",
         "--workers", "1", "--backlog", str(backlog), "--no-control-socket", "wsgi_app:app"],
        cwd=ROOT / "apps" / "python",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    for _ in range(200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/hello", timeout=1).read()
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("gunicorn did not start")


def load(port: int, c: int, secs: int, timeout: str) -> dict:
    out = subprocess.run(
        ["taskset", "-c", "1", str(VENV_BIN / "stackrace"), "load",
         f"http://127.0.0.1:{port}/hello", "-c", str(c), "-d", f"{secs}s",
         "--no-keepalive", "--timeout", timeout, "--json", "--no-progress"],
        capture_output=True, text=True, cwd=ROOT,
    ).stdout  # fmt: skip
    return json.loads(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-c", default="100,130,170,300", help="concurrencies, comma-separated")
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--backlogs", default="128,2048")
    parser.add_argument("--timeout", default="5s", help="per request, as a client would")
    args = parser.parse_args()
    somaxconn = Path("/proc/sys/net/core/somaxconn").read_text().strip()
    print(f"gunicorn sync, 1 process, /hello, {args.duration}s per run, new connection "
          f"per request, request timeout {args.timeout}; somaxconn here {somaxconn}\n")  # fmt: skip
    for backlog in (int(b) for b in args.backlogs.split(",")):
        for c in (int(x) for x in args.c.split(",")):
            proc, port = start(backlog)  # a fresh server: no run inherits another's queue
            try:
                run = load(port, c, args.duration, args.timeout)
            finally:
                proc.terminate()
                proc.wait()
            t, a = run["total"], run["accounting"]
            fails = ", ".join(f"{k} {v:,}" for k, v in sorted(t["failures"].items())) or "none"
            print(f"backlog {backlog:>5}  c={c:<5} {t['rps']:>7,.0f} req/s  "
                  f"{a['answered']:>7,} answered  failures: {fails:<14} "
                  f"max latency {t['latency']['max'] / 1e6:.2f}s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
