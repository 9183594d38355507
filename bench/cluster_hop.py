#!/usr/bin/env python3
"""What the cluster hop costs: the same load, once local and once through Ray.

    .venv/bin/python bench/cluster_hop.py [--rounds 3] [--duration 8] [-c 50]

bench/target (Go net/http, GOMAXPROCS=1) runs pinned to core 0. A three-node Ray
cluster runs on this machine, on loopback (tests/cluster/ray_cluster.py). Each round
loads /hello twice, in turn, for the same time at the same concurrency, with one engine
process pinned to core 1:
- local:   `Engine(procs=1, cpus=[1])`, the engine process a child of this driver;
- cluster: `ClusterRun.engine()`, the engine process a child of an EngineHost actor on
           the load node, its reports relayed through Ray (what `load --cluster` does).
For each run: req/s (the server's own count over the measured time); the report hop —
how long after its tick each merged snapshot is published (median and p99; local, that
is the pipe round trip, through Ray the actor calls); the driver's CPU; the relaying
actor's CPU; and the CPU of all Ray processes of the cluster (raylets, GCS, actors but
not the engine process) during the run. Medians over the rounds are printed, with the
command line, for docs/cluster.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "src"))

from engine_vs_wrk import PORT, build_target, served, start_server  # noqa: E402
from stackrace.cluster.placement import LoadEntry, NodePlacement, NodeRef  # noqa: E402
from stackrace.cluster.run import ClusterRun, local_cluster_env  # noqa: E402
from stackrace.engine.client import Engine  # noqa: E402
from stackrace.engine.model import EngineSettings, TargetSpec  # noqa: E402

ENGINE_CPU = 1


def cpu_of(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def ray_processes(root: int, exclude: set[int]) -> list[psutil.Process]:
    try:
        procs = psutil.Process(root).children(recursive=True)
    except psutil.Error:
        return []
    return [p for p in procs if p.pid not in exclude]


async def one_run(engine: Engine, conc: int, secs: float) -> dict[str, float]:
    await engine.start()
    delays: list[float] = []
    interval = engine.settings.interval
    try:
        await engine.add_target(
            TargetSpec(id="t", url=f"http://127.0.0.1:{PORT}/hello", concurrency=conc)
        )
        await asyncio.sleep(1.0)  # connections open, the first reports flow

        async def watch() -> None:
            async for snap in engine.snapshots():
                delays.append(snap.elapsed - snap.seq * interval)

        watcher = asyncio.create_task(watch())
        before = served()
        cpu0 = time.process_time()
        t0 = time.monotonic()
        await asyncio.sleep(secs)
        n = served() - before
        wall = time.monotonic() - t0
        driver_cpu = (time.process_time() - cpu0) / wall
        watcher.cancel()
    finally:
        await engine.stop()
    delays.sort()
    return {
        "rps": n / wall,
        "hop_p50_ms": 1000 * statistics.median(delays),
        "hop_p99_ms": 1000 * delays[min(len(delays) - 1, int(0.99 * len(delays)))],
        "driver_cpu_pct": 100 * driver_cpu,
    }


async def cluster_run(run: ClusterRun, cluster_pid: int, conc: int, secs: float) -> dict:
    """one_run through the cluster, with the CPU of the relaying actor and of all Ray
    processes (not the engine process itself) taken over the measured time."""
    engine = run.engine(EngineSettings())
    task = asyncio.create_task(one_run(engine, conc, secs))
    while not engine.links.made or engine.links.made[0].host_info is None:
        await asyncio.sleep(0.05)
    info = engine.links.made[0].host_info
    actor = psutil.Process(info.pid)
    await asyncio.sleep(1.0)  # as one_run: then its measured time starts
    engine_pids = {c.pid for c in actor.children()}
    ray_procs = ray_processes(cluster_pid, engine_pids)
    a0, r0, t0 = cpu_of([actor]), cpu_of(ray_procs), time.monotonic()
    await asyncio.sleep(secs - 0.1)
    a1, r1, t1 = cpu_of([actor]), cpu_of(ray_procs), time.monotonic()
    out = await task
    out["actor_cpu_pct"] = 100 * (a1 - a0) / (t1 - t0)
    out["ray_cpu_pct"] = 100 * (r1 - r0) / (t1 - t0)
    return out


async def main_async(args: argparse.Namespace, run: ClusterRun, cluster_pid: int) -> None:
    results: dict[str, list[dict[str, float]]] = {"local": [], "cluster": []}
    for r in range(args.rounds):
        local = await one_run(
            Engine(EngineSettings(), procs=1, cpus=[ENGINE_CPU]), args.c, args.duration
        )
        results["local"].append(local)
        remote = await cluster_run(run, cluster_pid, args.c, args.duration)
        results["cluster"].append(remote)
        print(
            f"round {r + 1}: local {local['rps']:,.0f} req/s, cluster {remote['rps']:,.0f} req/s",
            flush=True,
        )
    print()
    print(
        f"$ .venv/bin/python bench/cluster_hop.py --rounds {args.rounds} "
        f"--duration {args.duration:g} -c {args.c}"
    )
    keys = ["rps", "hop_p50_ms", "hop_p99_ms", "driver_cpu_pct", "actor_cpu_pct", "ray_cpu_pct"]
    print(f"{'':10}" + "".join(f"{k:>16}" for k in keys))
    for name, runs in results.items():
        row = []
        for k in keys:
            vals = [x[k] for x in runs if k in x]
            row.append(f"{statistics.median(vals):>16,.2f}" if vals else f"{'-':>16}")
        print(f"{name:10}" + "".join(row))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("-c", type=int, default=50)
    ap.add_argument("--json", default=None, help="also write every run's figures here")
    args = ap.parse_args()
    env = local_cluster_env()
    os.environ.update(env)
    server = start_server(build_target())
    cluster = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "cluster" / "ray_cluster.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    try:
        assert cluster.stdout is not None
        info = json.loads(cluster.stdout.readline())
        placement = NodePlacement(
            load=(LoadEntry(NodeRef("label", "stackrace-role", "load"), 1, (ENGINE_CPU,)),)
        )
        run = ClusterRun.connect(info["address"], placement)
        try:
            asyncio.run(main_async(args, run, cluster.pid))
        finally:
            run.close()
    finally:
        if cluster.stdin is not None:
            cluster.stdin.close()
        cluster.wait(60)
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
