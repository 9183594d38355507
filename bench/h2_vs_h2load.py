#!/usr/bin/env python3
"""Measure the engine's HTTP/2 against h2load (and oha where installed).

    .venv/bin/python bench/h2_vs_h2load.py [--rounds 5] [--duration 5] [--tls]
                                           [--shapes 32x32,1x100]

A Go net/http server (tests/apps/h2go: h2c with prior knowledge, or h2 by ALPN with
--tls) runs pinned to core 0 with GOMAXPROCS=1; each load tool runs pinned to core 1
(taskset), in turn, for the same time, with the same connections and streams per
connection (`CxM`: h2load's -c C -m M, stackrace's -c C --streams M, oha's -c C -p M),
for several rounds, the tools' order rotated each round (interleaved: a machine that
gets busier mid-run weighs on every tool alike). For each run: req/s by the server's
own count, and the tool's CPU per request (its process tree's user+sys time, from
wait4, over the requests the server answered). Medians are printed, and each tool's
ratio to h2load's within the same round (then their median): the figure that holds on
a machine other people are using, where absolute figures do not.

Needs: go, h2load (Debian's nghttp2-client), taskset. Optional: oha (`cargo install oha`).
The results and the method are in docs/engine.md (HTTP/2).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.h2servers import GoH2, build_h2go  # noqa: E402  # the same server as the tests

SERVER_CPU = "0"
TOOL_CPU = "1"


def commands(url: str, conns: int, streams: int, secs: int) -> dict[str, list[str]]:
    c, m = str(conns), str(streams)
    cmds = {
        "h2load": ["h2load", "-c", c, "-m", m, "-D", str(secs), url],
        "stackrace": [sys.executable, "-m", "stackrace.cli", "load", url, "--http2", "-c", c,
                      "--streams", m, "-d", f"{secs}s", "--json", "--no-progress", "-k"],
    }  # fmt: skip
    if shutil.which("oha"):
        cmds["oha"] = ["oha", "--no-tui", "--http2", "--insecure", "-c", c, "-p", m,
                       "-z", f"{secs}s", url]  # fmt: skip
    return cmds


def run_pinned(cmd: list[str]) -> float:
    """Run `cmd` on the tool core; its process tree's CPU seconds."""
    proc = subprocess.Popen(
        ["taskset", "-c", TOOL_CPU, *cmd],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{cmd[0]} exited with {code}")
    return usage.ru_utime + usage.ru_stime


def served(server: GoH2) -> int:
    """The server's count since the last call (read, then reset)."""
    n = server.count()
    import ssl
    import urllib.request

    ctx = ssl._create_unverified_context() if server.tls else None
    with urllib.request.urlopen(server.url("/reset"), timeout=10, context=ctx):
        pass
    return n


def measure(server: GoH2, shape: tuple[int, int], rounds: int, secs: int) -> dict[str, object]:
    """Each tool twice a round, short then long: the long run's req/s, and the marginal
    CPU of one more request (the difference of the two runs: start-up cancels out, a
    Python interpreter's as much as h2load's), and the whole run's."""
    conns, streams = shape
    url = server.url("/hello")
    short = max(1, secs // 4)
    rows: dict[str, dict[str, list[float]]] = {}
    names = list(commands(url, conns, streams, secs))
    for rnd in range(rounds):
        order = names[rnd % len(names) :] + names[: rnd % len(names)]
        got: dict[str, tuple[float, float, float]] = {}
        for name in order:
            runs = []
            for d in (short, secs):
                served(server)
                cpu = run_pinned(commands(url, conns, streams, d)[name])
                runs.append((cpu, served(server)))
            (cpu_s, n_s), (cpu_l, n_l) = runs
            whole = cpu_l / n_l * 1e6 if n_l else float("inf")
            marginal = (cpu_l - cpu_s) / (n_l - n_s) * 1e6 if n_l > n_s else float("inf")
            got[name] = (n_l / secs, marginal, whole)
            print(f"  {conns}x{streams} round {rnd + 1} {name:<10} {n_l / secs:>9.0f} req/s "
                  f"{marginal:6.2f} µs CPU/request marginal, {whole:6.2f} whole run",
                  file=sys.stderr)  # fmt: skip
        base = got["h2load"]
        for name, (rps, marginal, whole) in got.items():
            r = rows.setdefault(name, {k: [] for k in ("rps", "cpu_us", "cpu_us_whole",
                                                       "rps_x", "cpu_x")})  # fmt: skip
            r["rps"].append(rps)
            r["cpu_us"].append(marginal)
            r["cpu_us_whole"].append(whole)
            r["rps_x"].append(rps / base[0])
            r["cpu_x"].append(marginal / base[1])
    out: dict[str, object] = {}
    for name, r in rows.items():
        summary = {k: round(statistics.median(v), 3) for k, v in r.items()}
        for k in ("rps_x", "cpu_x"):
            summary[f"{k}_range"] = [round(min(r[k]), 3), round(max(r[k]), 3)]  # type: ignore[assignment]
        out[name] = summary
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=5, help="seconds per run")
    ap.add_argument("--tls", action="store_true", help="h2 by ALPN (default: h2c)")
    ap.add_argument("--shapes", default="32x32,1x100", help="CxM, comma-separated")
    args = ap.parse_args()
    for tool in ("h2load", "taskset"):
        if not shutil.which(tool):
            raise SystemExit(f"needs {tool} on PATH (h2load: Debian's nghttp2-client)")
    if not shutil.which("oha"):
        print("  (oha is not on PATH: its row is skipped)", file=sys.stderr)
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        binary = build_h2go(Path(tmp))
        # GOMAXPROCS=1 and core 0 (every thread of it): the server's CPU is the same for
        # every tool
        os.environ["GOMAXPROCS"] = "1"
        server = GoH2(binary, tls=args.tls)
        subprocess.run(["taskset", "-a", "-p", "-c", SERVER_CPU, str(server.proc.pid)],
                       check=True, capture_output=True)  # fmt: skip
        try:
            load = os.getloadavg()
            out = {
                "protocol": "h2 (TLS 1.3, ALPN)" if args.tls else "h2c (prior knowledge)",
                "rounds": args.rounds,
                "seconds": args.duration,
                "load_average_at_start": [round(x, 2) for x in load],
                "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "shapes": {
                    f"{c}x{m}": measure(server, (c, m), args.rounds, args.duration)
                    for c, m in shapes
                },
            }
        finally:
            server.kill()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
