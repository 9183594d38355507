#!/usr/bin/env python3
"""What a slow link does to each server: clients across a WAN, measured across hosts.

    sudo .venv/bin/python bench/cluster_wan.py [--stacks gunicorn-sync:workers=4,uvicorn,go-nethttp]
        [-c 50] [--duration 8] [--delay 25] [--loss 1] [--workload hello]

The multi-host topology of the tests (tests/cluster/netns.py: head, load1, load2, app,
each a network namespace with its own address on a bridge, a Ray node in each). Each
stack is raced alone with `stackrace bench --cluster` (one engine process on each load
host), twice: with the load hosts on the LAN (the bridge), then across a WAN (their
links `--delay` ms each way and `--loss` % lost each way: tc netem where the kernel has
it, else the delay line, tests/cluster/delayline.py). While each level runs, the app
host is sampled every 0.2 s:
- connections held: the stack's ESTABLISHED server-side connections (ss), on average;
- workers blocked by clients: of the stack's processes' samples, the share that sat in
  the kernel waiting on a client: in a socket read or write (wchan wait_woken,
  sk_wait_data, sk_stream_wait_memory: a request not all arrived, a client that does
  not read), or in poll/select while holding a client connection (gunicorn's sync
  worker, after its response, waits for the client to close before it takes the next
  one: one round trip, more when a packet is lost) — not idle in accept or in a poll
  with only the listener, not on a CPU.
Prints one row per stack and link: req/s, p50 (the latency floor), p99, failures,
connections held, workers blocked by clients. For docs/cluster.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cluster.netns import Topology, sweep, unavailable  # noqa: E402

CLIENT_WAITS = ("wait_woken", "sk_wait_data", "sk_stream_wait_memory")
# a process blocked in poll/select on a socket of one client (a sync worker); an event
# loop waits in epoll over all its clients, which is idle, never blocked by one
POLL_WAITS = ("do_select", "poll_schedule_timeout")
IDLE_WAITS = ("inet_csk_accept", "do_epoll_wait", "ep_poll", "futex_do_wait", "futex_wait_queue")


def holds_a_client(pid: int) -> bool:
    """The process has a connected TCP socket open (not only listeners): /proc/PID/fd's
    socket inodes against /proc/PID/net/tcp, the process's own namespace's table."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    if not inodes:
        return False
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                f = line.split()
                if f[9] in inodes and f[3] != "0A":  # 0A: LISTEN
                    return True
    return False


def stack_processes(topo: Topology) -> list[psutil.Process]:
    """The processes below the app host's AppHost actor (the stack and its workers)."""
    out = []
    for p in psutil.process_iter(["name"]):
        if (p.info["name"] or "").startswith("ray::AppHost"):
            try:
                out.extend(p.children(recursive=True))
            except psutil.Error:
                continue
    return out


class Sampler(threading.Thread):
    def __init__(self, topo: Topology) -> None:
        super().__init__(daemon=True)
        self.topo = topo
        self.stop = False
        self.conns: list[int] = []
        self.waits = {"client": 0, "idle": 0, "cpu": 0, "other": 0}
        self.wchans: dict[str, int] = {}  # what "other" was, for the curious
        self.active = False  # sample only while the level is measured

    def run(self) -> None:
        while not self.stop:
            time.sleep(0.2)
            if not self.active:
                continue
            procs = stack_processes(self.topo)
            pids = {p.pid for p in procs}
            ports = {port for _, port, pid in self.topo.listeners("app") if pid in pids}
            if not ports:
                continue
            out = self.topo.run(
                "app", ["ss", "-Htn", "state", "established"], capture_output=True, text=True
            ).stdout
            held = 0
            for line in out.splitlines():
                local = line.split()[2]
                if int(local.rpartition(":")[2]) in ports:
                    held += 1
            self.conns.append(held)
            for p in procs:
                try:
                    if p.status() == psutil.STATUS_RUNNING:
                        self.waits["cpu"] += 1
                        continue
                    wchan = Path(f"/proc/{p.pid}/wchan").read_text().strip().split(".")[0]
                except (psutil.Error, OSError):
                    continue
                if wchan in CLIENT_WAITS:
                    self.waits["client"] += 1
                elif wchan in POLL_WAITS:
                    self.waits["client" if holds_a_client(p.pid) else "idle"] += 1
                elif wchan in IDLE_WAITS:
                    self.waits["idle"] += 1
                else:
                    self.waits["other"] += 1
                    self.wchans[wchan] = self.wchans.get(wchan, 0) + 1


def measure(topo: Topology, stack: str, args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        out_json = Path(d) / "run.json"
        sampler = Sampler(topo)
        sampler.start()
        proc = topo.popen(
            "head",
            [
                str(ROOT / ".venv" / "bin" / "stackrace"),
                "bench",
                "--cluster",
                topo.ray_address(),
                "--stacks",
                stack,
                "--workload",
                args.workload,
                "--concurrency",
                str(args.concurrency),
                "--duration",
                f"{args.duration}s",
                "--warmup",
                "2s",
                "--json",
                str(out_json),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert proc.stderr is not None
        for line in proc.stderr:
            if "starting" in line:
                # the stack is up and warming within ~3 s; sample from then on
                time.sleep(3.0)
                sampler.active = True
            elif "req/s" in line:  # the level's line: it is over
                sampler.active = False
        proc.wait()
        sampler.stop = True
        sampler.join()
        if proc.returncode not in (0, 1):
            raise SystemExit(f"bench failed for {stack}: exit {proc.returncode}")
        run = json.loads(out_json.read_text())
    (st,) = run["stacks"]
    if st.get("error") or not st["levels"]:
        raise SystemExit(f"{stack}: {st.get('error')}")
    w = st["levels"][0]["window"]
    waits = sampler.waits
    blocked = waits["client"] / max(1, sum(waits.values()))
    return {
        "rps": w["rps"],
        "p50_ms": w["latency"]["p50"] / 1000,
        "p99_ms": w["latency"]["p99"] / 1000,
        "failed": sum(w["failures"].values()),
        "held": sum(sampler.conns) / max(1, len(sampler.conns)),
        "blocked_pct": 100 * blocked,
        "waits": dict(waits),
        "other": dict(sorted(sampler.wchans.items(), key=lambda kv: -kv[1])[:4]),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--stacks", default="gunicorn-sync:workers=4,uvicorn,go-nethttp")
    p.add_argument("-c", "--concurrency", type=int, default=50)
    p.add_argument("--duration", type=float, default=8.0)
    p.add_argument("--delay", type=float, default=25.0, help="ms each way on the WAN")
    p.add_argument("--loss", type=float, default=1.0, help="%% lost each way on the WAN")
    p.add_argument("--workload", default="hello")
    args = p.parse_args()
    why = unavailable()
    if why:
        print(f"cluster_wan: {why}", file=sys.stderr)
        return 2
    sweep()
    topo = Topology(roles=("head", "load1", "load2", "app"))
    rows = []
    try:
        topo.up()
        topo.start_ray()
        stacks = args.stacks.split(",")
        for link in ("LAN", "WAN"):
            if link == "WAN":
                for role in ("load1", "load2"):
                    how = topo.slow(role, args.delay, args.loss)
                print(f"WAN: {args.delay:g} ms each way, {args.loss:g} % loss each way ({how})")
            for stack in stacks:
                r = measure(topo, stack, args)
                rows.append((link, stack, r))
                print(f"  {link} {stack}: {r}", file=sys.stderr, flush=True)
    finally:
        topo.down()
    print(
        f"\n$ sudo .venv/bin/python bench/cluster_wan.py --stacks {args.stacks} "
        f"-c {args.concurrency} --duration {args.duration:g} --delay {args.delay:g} "
        f"--loss {args.loss:g} --workload {args.workload}"
    )
    head = ("link", "stack", "req/s", "p50 ms", "p99 ms", "failed", "conns held", "blocked %")
    print(f"{head[0]:<5} {head[1]:<24} " + " ".join(f"{h:>10}" for h in head[2:]))
    for link, stack, r in rows:
        print(
            f"{link:<5} {stack:<24} {r['rps']:>10,.0f} {r['p50_ms']:>10.2f} {r['p99_ms']:>10.2f} "
            f"{r['failed']:>10,} {r['held']:>10.1f} {r['blocked_pct']:>10.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
