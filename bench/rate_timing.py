#!/usr/bin/env python3
"""Rate mode on time: stackrace's scheduler against vegeta's, on the same server.

    PATH=/work/tools:$PATH .venv/bin/python bench/rate_timing.py [--rounds 3]
        [--duration 6] [--rates 1000,2000,6000,20000] [--delay-ms 5]

A constant-rate tool measures latency from when each request was *due*; a request that
leaves late carries its lateness into every figure (stackrace's corrected latency, as
wrk2's). This runs the Go target (bench/target, /delay?ms=N: a server that answers in N
ms) pinned to core 0 with GOMAXPROCS=1, then each tool pinned to core 1 in turn at each
rate, in alternating rounds, and prints medians:

- vegeta's p50/p99 (it measures from the send, which its Go timers make on time);
- stackrace's corrected p50/p99 (from the due time), its uncorrected p50 (from the
  send), and its own send lateness (due time to write, `send_lateness` in load --json);
- the difference of the p50s: the engine's error at the median.

By default stackrace runs as vegeta does, the whole tool on core 1: its driver (which
reads the engine's reports four times a second) and its engine process share that core,
and the driver's work delays due sends (measured: the engine's write of a report took
~1.7 ms, the driver woken on the same core running first). `--engine-core` gives the
engine process core 1 (`load --engine-cpus 1`); `load` then moves its driver off it,
onto the server's core — the placement a user who wants exact timing chooses.

`--ceiling` instead measures what one engine process can schedule: stackrace alone at
rising rates against /hello (a server that answers at once), with the rate it delivered
and its send lateness at each; the engine's ceiling per process (MAX_RATE_PER_PROCESS,
engine/model.py) is set below the rate where it stops keeping up.

`--wire` also captures every run's packets on loopback (bench/wire.py: tcpdump, kernel
timestamps) and prints the wire's own p50 beside each tool's: request segment out to
answer segment back, per connection. A tool's p50 minus the wire's is its own time per
request — which of two disagreeing tools is off, measured rather than argued.

vegeta is installed with `go install github.com/tsenart/vegeta/v12@v12.12.0` (GOBIN on
PATH); without it on PATH its columns are skipped with a note.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable
from functools import partial

import engine_vs_wrk
from engine_vs_wrk import (
    PORT,
    ROOT,
    SERVER_CPU,
    TOOL_CPU,
    add_baseline_argument,
    build_target,
    require,
    skip_note,
    start_server,
    use_baseline,
)
from wire import Capture


def _us(ns: float) -> float:
    return ns / 1000


def vegeta(url: str, rate: int, secs: int) -> dict[str, float]:
    attack = subprocess.Popen(
        ["taskset", "-c", TOOL_CPU, "vegeta", "attack", f"-rate={rate}/s", f"-duration={secs}s",
         "-keepalive=true", "-timeout=10s"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )  # fmt: skip
    assert attack.stdin is not None
    attack.stdin.write(f"GET {url}\n".encode())
    attack.stdin.close()
    report = subprocess.run(
        ["vegeta", "report", "-type=json"],
        stdin=attack.stdout,
        capture_output=True,
        check=True,
    )
    attack.wait()
    data = json.loads(report.stdout)
    lat = data["latencies"]
    return {"p50": _us(lat["50th"]), "p99": _us(lat["99th"]), "ok": data["success"]}


def with_wire(wire: bool, run: Callable[[], dict[str, float]]) -> dict[str, float]:
    """`run()`'s figures, and with `wire` the wire's p50/p99 (µs) of the same run."""
    if not wire:
        return run()
    cap = Capture(PORT, cpu=SERVER_CPU)  # beside the server: the tool's core stays its own
    try:
        figures = run()
    finally:
        lat, dropped = cap.stop()
    if dropped:
        print(f"  (tcpdump dropped {dropped} packets)", file=sys.stderr)
    lat.sort()
    figures["wire_p50"] = _us(lat[len(lat) // 2]) if lat else float("nan")
    figures["wire_p99"] = _us(lat[int(len(lat) * 0.99)]) if lat else float("nan")
    return figures


def stackrace(
    url: str, rate: int, secs: int, conns: int, engine_core: bool, src: str | None = None
) -> dict[str, float]:
    # src: the engine's sources to run (--baseline-src), else the installed ones.
    # one core for the whole tool (driver and engine, as vegeta's one process), or the
    # engine process on that core and the driver off it (`load --engine-cpus` moves it)
    where = [] if engine_core else ["taskset", "-c", TOOL_CPU]
    pin = ["--engine-cpus", TOOL_CPU] if engine_core else []
    env = ["env", f"PYTHONPATH={src}"] if src else []
    out = subprocess.run(
        [*env, *where, sys.executable, "-m", "stackrace.cli", "load", url, *pin,
         "--rate", str(rate), "-c", str(conns), "-d", f"{secs}s", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )  # fmt: skip
    total = json.loads(out.stdout)["total"]
    late = total.get("send_lateness") or {}
    return {
        "p50": total["latency"]["p50"],
        "p99": total["latency"]["p99"],
        "unc_p50": total["latency_uncorrected"]["p50"],
        "late_p50": late.get("p50", 0),
        "late_p99": late.get("p99", 0),
        "late_sends": total["late"],
    }


def _wire_note(f: dict[str, float]) -> str:
    return (
        f"  [wire p50 {f['wire_p50']:.0f} µs p99 {f['wire_p99']:.0f} µs]" if "wire_p50" in f else ""
    )


def ceiling(args: argparse.Namespace) -> None:
    rates = [10_000, 20_000, 30_000, 40_000, 50_000, 60_000, 70_000]
    require("go", "taskset")
    url = f"http://127.0.0.1:{PORT}/hello"
    server = start_server(build_target())
    rows: dict[int, list[dict[str, float]]] = {r: [] for r in rates}
    try:
        for rnd in range(args.rounds):
            for rate in rates:
                out = subprocess.run(
                    ["taskset", "-c", TOOL_CPU, sys.executable, "-m", "stackrace.cli", "load",
                     url, "--rate", str(rate), "-c", "200", "-d", f"{args.duration}s", "--json"],
                    capture_output=True, text=True, cwd=ROOT,
                )  # fmt: skip
                if out.returncode != 0:
                    print(f"  {rate}/s: {out.stderr.strip()}", file=sys.stderr)
                    continue
                total = json.loads(out.stdout)["total"]
                late = total.get("send_lateness") or {}
                row = {
                    "rps": total["rps"],
                    "late_p50": late.get("p50", 0),
                    "late_p99": late.get("p99", 0),
                    "late_share": total["late"] / max(1, total["sent"]),
                }
                rows[rate].append(row)
                print(
                    f"  round {rnd + 1} {rate:>6}/s delivered {row['rps']:8.0f}/s, lateness "
                    f"p50 {row['late_p50']:.0f} µs p99 {row['late_p99']:.0f} µs, "
                    f"{100 * row['late_share']:.1f}% sent > 2 ms late",
                    file=sys.stderr,
                )
    finally:
        server.terminate()
        server.wait()
    print(f"\none engine process, rate mode, /hello, 200 connections, {args.duration}s (medians)")
    print(f"{'rate':>7}  {'delivered':>9}  {'lateness p50':>12} {'p99':>7}  {'> 2 ms late':>11}")
    for rate, rs in rows.items():
        if not rs:
            continue
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        print(
            f"{rate:>7}  {med['rps']:>9.0f}  {med['late_p50']:>12.0f} {med['late_p99']:>7.0f}  "
            f"{100 * med['late_share']:>10.1f}%"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=6)
    ap.add_argument("--rates", default="1000,2000,6000,20000")
    ap.add_argument("--delay-ms", type=int, default=5)
    ap.add_argument(
        "-c", "--connections", type=int, default=400, help="stackrace's connections (rate mode)"
    )
    ap.add_argument(
        "--engine-core",
        action="store_true",
        help="stackrace's engine process alone on the tool core (load --engine-cpus), its "
        "driver on the other core, beside the server; default: the whole tool on one core",
    )
    ap.add_argument(
        "--wire",
        action="store_true",
        help="capture each run on loopback (tcpdump) and print the wire's p50 beside each tool's",
    )
    ap.add_argument(
        "--ceiling",
        action="store_true",
        help="find one engine process's scheduling ceiling (stackrace alone, /hello)",
    )
    add_baseline_argument(ap)
    args = ap.parse_args()
    use_baseline(args)
    if args.ceiling:
        ceiling(args)
        return
    rates = [int(r) for r in args.rates.split(",")]
    require("go", "taskset", *(["tcpdump"] if args.wire else []))
    have_vegeta = shutil.which("vegeta") is not None
    if not have_vegeta:
        skip_note("vegeta")
    url = f"http://127.0.0.1:{PORT}/delay?ms={args.delay_ms}"
    server = start_server(build_target())
    veg: dict[int, list[dict[str, float]]] = {r: [] for r in rates}
    sr: dict[int, list[dict[str, float]]] = {r: [] for r in rates}
    base: dict[int, list[dict[str, float]]] = {r: [] for r in rates}
    baseline = engine_vs_wrk.BASELINE_SRC
    try:
        for rnd in range(args.rounds):
            for rate in rates:
                if have_vegeta:
                    v = with_wire(args.wire, partial(vegeta, url, rate, args.duration))
                    veg[rate].append(v)
                    print(f"  round {rnd + 1} {rate:>6}/s vegeta     p50 {v['p50']:8.0f} µs  "
                          f"p99 {v['p99']:8.0f} µs{_wire_note(v)}", file=sys.stderr)  # fmt: skip
                s = with_wire(
                    args.wire,
                    partial(
                        stackrace, url, rate, args.duration, args.connections, args.engine_core
                    ),
                )
                sr[rate].append(s)
                print(
                    f"  round {rnd + 1} {rate:>6}/s stackrace  p50 {s['p50']:8.0f} µs  "
                    f"p99 {s['p99']:8.0f} µs  (uncorrected p50 {s['unc_p50']:.0f} µs; "
                    f"send lateness p50 {s['late_p50']:.0f} µs, p99 {s['late_p99']:.0f} µs)"
                    f"{_wire_note(s)}",
                    file=sys.stderr,
                )
                if baseline:
                    b = stackrace(
                        url, rate, args.duration, args.connections, args.engine_core, baseline
                    )
                    base[rate].append(b)
                    print(
                        f"  round {rnd + 1} {rate:>6}/s baseline   p50 {b['p50']:8.0f} µs  "
                        f"send lateness p50 {b['late_p50']:.0f} µs, p99 {b['late_p99']:.0f} µs",
                        file=sys.stderr,
                    )
    finally:
        server.terminate()
        server.wait()

    def med(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in rows) if rows else float("nan")

    print(
        f"\nrate mode against a {args.delay_ms} ms server, {args.duration}s per run, "
        f"{args.rounds} rounds (medians, µs); stackrace "
        + (
            f"engine on core {TOOL_CPU}, its driver off it (--engine-core)"
            if args.engine_core
            else f"driver and engine on core {TOOL_CPU}"
        )
    )
    print(
        f"{'rate':>7}  {'vegeta p50':>10} {'p99':>7}  {'stackrace p50':>13} {'p99':>7}  "
        f"{'uncorr. p50':>11}  {'lateness p50':>12} {'p99':>6}  {'p50 - vegeta':>12}"
    )
    for rate in rates:
        vp50, vp99 = med(veg[rate], "p50"), med(veg[rate], "p99")
        sp50 = med(sr[rate], "p50")
        print(
            f"{rate:>7}  {vp50:>10.0f} {vp99:>7.0f}  {sp50:>13.0f} {med(sr[rate], 'p99'):>7.0f}  "
            f"{med(sr[rate], 'unc_p50'):>11.0f}  {med(sr[rate], 'late_p50'):>12.0f} "
            f"{med(sr[rate], 'late_p99'):>6.0f}  {sp50 - vp50:>+12.0f}"
        )
    if baseline:
        print(f"\nthe engine from {baseline} in the same rounds (medians, µs)")
        print(f"{'rate':>7}  {'p50':>7} {'p99':>7}  {'lateness p50':>12} {'p99':>6}")
        for rate in rates:
            print(
                f"{rate:>7}  {med(base[rate], 'p50'):>7.0f} {med(base[rate], 'p99'):>7.0f}  "
                f"{med(base[rate], 'late_p50'):>12.0f} {med(base[rate], 'late_p99'):>6.0f}"
            )
    if args.wire:
        print(
            "\nagainst the wire (tcpdump on lo: request segment out to answer segment back, "
            "each tool's own runs; medians, µs)"
        )
        print(
            f"{'rate':>7}  {'wire p50':>8} {'vegeta p50':>10} {'- wire':>7}  "
            f"{'wire p50':>8} {'stackrace uncorr. p50':>21} {'- wire':>7} "
            f"{'corr. p50':>9} {'- wire':>7}"
        )
        for rate in rates:
            vw, sw = med(veg[rate], "wire_p50"), med(sr[rate], "wire_p50")
            vp50, su, sc = med(veg[rate], "p50"), med(sr[rate], "unc_p50"), med(sr[rate], "p50")
            print(
                f"{rate:>7}  {vw:>8.0f} {vp50:>10.0f} {vp50 - vw:>+7.0f}  "
                f"{sw:>8.0f} {su:>21.0f} {su - sw:>+7.0f} {sc:>9.0f} {sc - sw:>+7.0f}"
            )


if __name__ == "__main__":
    main()
