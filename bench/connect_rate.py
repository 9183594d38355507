#!/usr/bin/env python3
"""A new connection per request: stackrace's engine against wrk and ab.

    .venv/bin/python bench/connect_rate.py [--rounds 3] [--duration 6] [-c 50]

The keep-alive-off presets (ab without -k, gunicorn's sync worker) open a TCP connection
for every request, and there the engine's core is what limits the figure first (the
PyPy panes of seed-002-pypy-frameworks are engine-limited at 9–12k new connections a
second). This measures that ceiling against the C tools, as engine_vs_wrk.py does for
keep-alive: the Go target on core 0 (GOMAXPROCS=1), each tool on core 1 in turn, the
same time and concurrency, alternating rounds; req/s is what the *server* counted, CPU
is the tool's whole process tree (wait4). Ratios are per round against wrk, then the
median. wrk sends `Connection: close` and reconnects after every response; ab runs
without -k; stackrace runs `load --no-keepalive`; bare_uvloop_client.py with `close` is
the least a uvloop client can do per connection (create_connection, write, close).
"""

from __future__ import annotations

import argparse
import statistics
import sys

from engine_vs_wrk import build_target, require, run_tool, served, start_server, tool_commands


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=6)
    ap.add_argument("-c", "--concurrency", type=int, default=50)
    args = ap.parse_args()
    require("go", "wrk", "taskset")
    server = start_server(build_target())
    res: dict[str, dict[str, list[float]]] = {}
    try:
        for rnd in range(args.rounds):
            cmds = tool_commands("/hello", args.concurrency, args.duration, close=True)
            for name, cmd in cmds.items():
                served()  # reset the server's count
                _wall, cpu, _ = run_tool(cmd)
                n = served()
                r = res.setdefault(name, {"rps": [], "us": []})
                r["rps"].append(n / args.duration)
                r["us"].append(cpu / n * 1e6 if n else float("inf"))
                print(
                    f"  round {rnd + 1} {name:<10} {n / args.duration:>8.0f} conn/s  "
                    f"{r['us'][-1]:6.1f} µs CPU per connection",
                    file=sys.stderr,
                )
    finally:
        server.terminate()
        server.wait()
    wrk = res["wrk"]
    print(
        f"\nnew connection per request, /hello, c={args.concurrency}, {args.duration}s, "
        f"{args.rounds} rounds (medians; ratios per round)"
    )
    print(f"{'tool':<12}{'req/s':>9}{'vs wrk':>8}   {'µs CPU/req':>10}{'vs wrk':>8}")
    for name, r in res.items():
        rps = statistics.median(a / b for a, b in zip(r["rps"], wrk["rps"], strict=True))
        us = statistics.median(a / b for a, b in zip(r["us"], wrk["us"], strict=True))
        print(
            f"{name:<12}{statistics.median(r['rps']):>9.0f}{rps:>7.2f}x   "
            f"{statistics.median(r['us']):>10.1f}{us:>7.2f}x"
        )


if __name__ == "__main__":
    main()
