#!/usr/bin/env python3
"""A new connection per request: stackrace's engine against wrk and ab.

    .venv/bin/python bench/connect_rate.py [--rounds 5] [--duration 6] [-c 50]
                     [--tls [--tls-version 1.3|1.2] [--cert ecdsa|rsa] [--resume]]
                     [--py-transport] [--baseline-src DIR]

The keep-alive-off presets (ab without -k, gunicorn's sync worker) open a TCP connection
for every request, and there the engine's core is what limits the figure first. This
measures that ceiling against the C tools, as engine_vs_wrk.py does for keep-alive: the
Go target on core 0 (GOMAXPROCS=1), each tool on core 1 in turn, the same concurrency,
alternating rounds; req/s is what the *server* counted, CPU is the tool's whole process
tree (wait4). Ratios are per round against wrk, then the median.

Each tool runs twice per round, a short run and a long one: "whole run" is the long
run's CPU per connection, start-up included (a Python process spends ~0.3 s of CPU
importing and starting its engine, wrk ~1 ms); "marginal" is the difference between the
two runs divided by the difference in connections, the cost of one more connection with
start-up cancelled out, the same for every tool. wrk sends `Connection: close` and
reconnects after every response; ab runs without -k; stackrace runs `load
--no-keepalive`; bare_uvloop_client.py with `close` is the least a uvloop client can do
per connection with create_connection (what the engine used before it opened its own
sockets); `C, engine's calls` (c_cycle_floor.c) is the engine's own system calls per
connection in C with nothing parsed, the floor of rewriting its cycle in C; `C + Python
per answer` (c_cycle_hybrid.py) is that loop counting each answer in Python as the
engine's response callback does (`per batch`: a call per epoll batch). hey and oha
join when they are on PATH. `--baseline-src DIR` adds the engine
of another checkout's sources (e.g. main's) as "stackrace (baseline)", in the same rounds.

`--tls`: a new TLS connection per request, a handshake each: full ones unless
`--resume` (engine_vs_wrk.py's docstring: the server issues no session tickets, so wrk,
which resumes whenever it can, makes full handshakes too), TLS 1.3 or 1.2, an ECDSA or
an RSA certificate; the C floor rows are plain TCP and left out. The share of each
tool's handshakes that resumed, as the server counted them, is printed beside it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import engine_vs_wrk
from engine_vs_wrk import (
    PORT,
    ROOT,
    add_baseline_argument,
    add_tls_argument,
    build_target,
    require,
    resumed,
    run_tool,
    served,
    skip_note,
    start_server,
    tls_setting,
    tool_commands,
    use_baseline,
    use_tls_arguments,
)


def build_floor() -> Path:
    """c_cycle_floor.c, built once (and again when it changes): the engine's system calls
    per connection in C with nothing else, the bound of rewriting its cycle in C."""
    src = ROOT / "bench" / "c_cycle_floor.c"
    out = ROOT / ".stackrace" / "bench" / "c_cycle_floor"
    out.parent.mkdir(parents=True, exist_ok=True)
    newest = max(p.stat().st_mtime for p in (src, src.with_name("c_cycle.h")))
    if not out.exists() or out.stat().st_mtime < newest:
        subprocess.run(["cc", "-O2", "-o", str(out), str(src)], check=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=6)
    ap.add_argument("-c", "--concurrency", type=int, default=50)
    add_baseline_argument(ap)
    add_tls_argument(ap)
    args = ap.parse_args()
    use_baseline(args)
    use_tls_arguments(args)
    require("go", "wrk", "taskset")
    for tool in ("ab", "hey", "oha"):
        if not shutil.which(tool):
            skip_note(tool)
    floor = None if args.tls else build_floor()
    server = start_server(build_target())
    short = max(1, args.duration // 3)
    load = os.getloadavg()[0]
    print(f"== {tls_setting()}; load average {load:.2f} at the start", file=sys.stderr)

    def commands(secs: int) -> dict[str, list[str]]:
        cmds = tool_commands("/hello", args.concurrency, secs, close=True)
        if floor is not None:
            cmds["C, engine's calls"] = [str(floor), str(PORT), str(args.concurrency), str(secs)]
            hybrid = [sys.executable, str(ROOT / "bench" / "c_cycle_hybrid.py"), str(PORT)]
            cmds["C + Python per answer"] = [*hybrid, str(args.concurrency), str(secs)]
            cmds["C + Python per batch"] = [*hybrid, str(args.concurrency), str(secs), "batch"]
        return cmds

    res: dict[str, dict[str, list[float]]] = {}
    try:
        for rnd in range(args.rounds):
            names = list(commands(args.duration))
            for name in names:
                runs = []
                for secs in (short, args.duration):
                    served()  # reset the server's counts
                    resumed()
                    cmd = commands(secs)[name]
                    _wall, cpu, _ = run_tool(cmd)
                    runs.append((cpu, served()))
                (cpu_s, n_s), (cpu_l, n_l) = runs
                r = res.setdefault(name, {"rps": [], "us": [], "marginal": [], "resumed": []})
                r["resumed"].append(resumed() / n_l if n_l else 0.0)
                r["rps"].append(n_l / args.duration)
                r["us"].append(cpu_l / n_l * 1e6 if n_l else float("inf"))
                marginal = (cpu_l - cpu_s) / (n_l - n_s) * 1e6 if n_l > n_s else float("inf")
                r["marginal"].append(marginal)
                print(
                    f"  round {rnd + 1} {name:<29} {n_l / args.duration:>8.0f} conn/s  "
                    f"{r['us'][-1]:6.1f} µs CPU per connection (whole run)  "
                    f"{marginal:6.1f} µs marginal",
                    file=sys.stderr,
                )
    finally:
        server.terminate()
        server.wait()
    wrk = res["wrk"]
    tls = engine_vs_wrk.TLS_FILES is not None
    print(
        f"\nnew connection per request, /hello, c={args.concurrency}, {args.duration}s "
        f"(and {short}s for the marginal cost), {args.rounds} rounds (medians; ratios per round)"
        f"\n{tls_setting()}; load average {os.getloadavg()[0]:.2f} at the end"
    )
    print(
        f"{'tool':<30}{'req/s':>8}{'vs wrk':>8}   {'µs CPU/req':>10}{'vs wrk':>8}"
        f"   {'marginal µs':>11}{'vs wrk':>8}" + ("  resumed" if tls else "")
    )
    for name, r in res.items():

        def ratio(key: str, r: dict[str, list[float]] = r) -> float:
            return statistics.median(a / b for a, b in zip(r[key], wrk[key], strict=True))

        print(
            f"{name:<30}{statistics.median(r['rps']):>8.0f}{ratio('rps'):>7.2f}x   "
            f"{statistics.median(r['us']):>10.1f}{ratio('us'):>7.2f}x   "
            f"{statistics.median(r['marginal']):>11.1f}{ratio('marginal'):>7.2f}x"
            + (f"  {100 * statistics.median(r['resumed']):6.0f}%" if tls else "")
        )


if __name__ == "__main__":
    main()
