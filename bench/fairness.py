#!/usr/bin/env python3
"""Is a race fair? A stack's figures must not depend on which stacks share the engine.

    .venv/bin/python bench/fairness.py [--rounds 3] [--duration 8] [-c 200]

Four stacks (gunicorn sync — which answers `Connection: close`, so its clients reconnect
for every request — beside gevent, uvicorn and aiohttp, all keep-alive) serve /hello,
every server pinned to core 0, all load on core 1. Three ways to load them at the same
time, alternated for several rounds:

  separate   four `stackrace load` processes, one per stack (the reference: nothing a
             stack's load does can delay another's, but the processes share core 1)
  race       one driver, one engine process per stack (`Engine(per_target=True)`):
             how the app and `bench --isolation parallel` race now
  shared     one driver, one engine process for all four: how they raced before

For each it prints gunicorn-sync's req/s and the ratio to `separate` in the same round
(the goal: race ≥ 0.9), the engine's lag per stack (mean, µs) and whether any pane
would say engine-limited. Medians over rounds.

Then promptness on Connection: close: gunicorn sync's worker half-closes after each
response and waits for the client's FIN before it accepts the next connection, so the
client must close at once. stackrace and wrk (both on core 1) load gunicorn-sync
/hello at c=50 in turn; the script prints req/s, the ratio to wrk, the worker's
voluntary context switches per request and its CPU µs per request.
Needs: the stacks installed (./dev test sets them up), wrk, taskset.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from stackrace.engine.client import Engine  # noqa: E402
from stackrace.engine.model import EngineSettings, TargetSpec  # noqa: E402
from stackrace.rules.engine import engine_limited  # noqa: E402
from stackrace.stacks.catalogue import load_stacks  # noqa: E402
from stackrace.stacks.launcher import Launcher  # noqa: E402
from stackrace.stacks.running import RunningStack  # noqa: E402
from stackrace.stacks.variants import resolve  # noqa: E402

STACKS = ("gunicorn-sync", "gunicorn-gevent", "uvicorn", "aiohttp")
SERVER_CPU = [0]
ENGINE_CPU = [1]


async def start_stacks(launcher: Launcher) -> dict[str, RunningStack]:
    import msgspec

    defs = load_stacks()
    out = {}
    for name in STACKS:
        stack = resolve(name, defs)
        pinned = msgspec.structs.replace(stack.spec, cpus=SERVER_CPU)
        from dataclasses import replace

        out[name] = await launcher.start(replace(stack, spec=pinned))
    return out


def separate(urls: dict[str, str], conc: int, secs: float) -> dict[str, float]:
    procs = {
        name: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "stackrace.cli",
                "load",
                url,
                "-c",
                str(conc),
                "-d",
                f"{secs}s",
                "--engine-cpus",
                ",".join(map(str, ENGINE_CPU)),
                "--json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=ROOT,
        )
        for name, url in urls.items()
    }
    out = {}
    for name, p in procs.items():
        stdout, _ = p.communicate(timeout=secs + 60)
        out[name] = json.loads(stdout)["total"]["rps"]
    return out


async def one_driver(
    urls: dict[str, str], conc: int, secs: float, per_target: bool
) -> tuple[dict[str, float], dict[str, float], dict[str, bool]]:
    engine = Engine(EngineSettings(), per_target=per_target, cpus=ENGINE_CPU)
    async with engine:
        for name, url in urls.items():
            await engine.add_target(TargetSpec(id=name, url=url, concurrency=conc))
        await asyncio.sleep(1.0)
        engine.reset_totals()
        await asyncio.sleep(secs)
        snap = engine.latest
        assert snap is not None
    rps = {t.id: t.total.rps for t in snap.targets}
    lag = {t.id: t.total.lag.mean for t in snap.targets}
    limited = {t.id: engine_limited(t.total, t.saturated) for t in snap.targets}
    return rps, lag, limited


def ctx_switches(pids: list[int]) -> tuple[int, float]:
    vol = 0
    cpu = 0.0
    for pid in pids:
        try:
            p = psutil.Process(pid)
            vol += p.num_ctx_switches().voluntary
            t = p.cpu_times()
            cpu += t.user + t.system
        except psutil.Error:
            pass
    return vol, cpu


def promptness(rs: RunningStack, conc: int, secs: float, rounds: int) -> None:
    url = rs.url
    tools = {
        "stackrace": [
            "taskset",
            "-c",
            "1",
            sys.executable,
            "-m",
            "stackrace.cli",
            "load",
            url,
            "-c",
            str(conc),
            "-d",
            f"{secs}s",
            "--json",
        ],
        "wrk": ["taskset", "-c", "1", "wrk", "-t1", f"-c{conc}", f"-d{int(secs)}s", url],
    }
    results: dict[str, list[tuple[float, float, float]]] = {k: [] for k in tools}
    for _ in range(rounds):
        for name, cmd in tools.items():
            pids = rs.all_pids()
            v0, c0 = ctx_switches(pids)
            out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT).stdout
            v1, c1 = ctx_switches(pids)
            if name == "wrk":
                import re

                m = re.search(r"(\d+) requests in", out)
                n = int(m.group(1)) if m else 0
            else:
                n = json.loads(out)["total"]["requests"]
            rps = n / secs
            results[name].append((rps, (v1 - v0) / max(1, n), 1e6 * (c1 - c0) / max(1, n)))
    wrk_rps = statistics.median(r[0] for r in results["wrk"])
    print(f"\nConnection: close promptness, gunicorn-sync /hello, c={conc}, {secs:g}s x {rounds}")
    print(
        f"{'tool':<10} {'req/s':>8} {'vs wrk':>7} {'worker ctx sw/req':>18} {'server µs/req':>14}"
    )
    for name, rows in results.items():
        rps = statistics.median(r[0] for r in rows)
        cs = statistics.median(r[1] for r in rows)
        cpu = statistics.median(r[2] for r in rows)
        print(f"{name:<10} {rps:>8,.0f} {rps / wrk_rps:>6.2f}x {cs:>18.2f} {cpu:>14.0f}")


async def main_async(args: argparse.Namespace) -> int:
    async with Launcher() as launcher:
        running = await start_stacks(launcher)
        urls = {name: rs.url for name, rs in running.items()}
        table: dict[str, list[dict[str, float]]] = {"separate": [], "race": [], "shared": []}
        lags: dict[str, list[dict[str, float]]] = {"race": [], "shared": []}
        flagged: dict[str, set[str]] = {"race": set(), "shared": set()}
        for r in range(args.rounds):
            table["separate"].append(await asyncio.to_thread(separate, urls, args.c, args.duration))
            for mode, per_target in (("race", True), ("shared", False)):
                rps, lag, limited = await one_driver(urls, args.c, args.duration, per_target)
                table[mode].append(rps)
                lags[mode].append(lag)
                flagged[mode] |= {k for k, v in limited.items() if v}
            sync = {m: table[m][-1]["gunicorn-sync"] for m in table}
            print(
                f"round {r + 1}: gunicorn-sync req/s separate {sync['separate']:,.0f}, "
                f"race {sync['race']:,.0f}, shared {sync['shared']:,.0f}",
                flush=True,
            )
        print(
            f"\nFairness: {', '.join(STACKS)} on /hello, c={args.c} each, "
            f"servers on cpu 0, load on cpu 1; medians of {args.rounds} rounds"
        )
        print(f"{'load':<10}" + "".join(f"{s:>17}" for s in STACKS) + f"{'sync vs separate':>18}")
        for mode, rows in table.items():
            med = {s: statistics.median(r[s] for r in rows) for s in STACKS}
            ratios = [
                r["gunicorn-sync"] / sep["gunicorn-sync"]
                for r, sep in zip(rows, table["separate"], strict=True)
            ]
            ratio = "" if mode == "separate" else f"{statistics.median(ratios):>17.2f}x"
            print(f"{mode:<10}" + "".join(f"{med[s]:>17,.0f}" for s in STACKS) + ratio)
        for mode in ("race", "shared"):
            med = {s: statistics.median(r[s] for r in lags[mode]) for s in STACKS}
            shown = "  ".join(f"{s} {med[s]:,.0f}µs" for s in STACKS)
            flags = ", ".join(sorted(flagged[mode])) or "none"
            print(f"engine lag (mean), {mode}: {shown}; engine-limited: {flags}")
        if shutil.which("wrk") and not args.skip_promptness:
            await asyncio.to_thread(
                promptness, running["gunicorn-sync"], 50, args.duration, args.rounds
            )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("-c", type=int, default=200)
    parser.add_argument("--skip-promptness", action="store_true")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
