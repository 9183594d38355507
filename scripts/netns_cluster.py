#!/usr/bin/env python3
"""A multi-host Ray cluster on this one machine, to try `--cluster` the way it runs on
real hosts: four network namespaces on a bridge (head, load1, load2, app; 198.18.0.0/24),
a Ray node in each, labelled as docs/cluster.md says. Needs root.

    sudo .venv/bin/python scripts/netns_cluster.py            # up; Ctrl-C takes it down
    sudo .venv/bin/python scripts/netns_cluster.py --wan 25,1 # load hosts 25 ms away, 1 % loss
    sudo .venv/bin/python scripts/netns_cluster.py sweep      # what killed runs left behind

While it is up it prints the commands to run on the head host (the driver's host), e.g.

    ip netns exec sr-4242-0-head .venv/bin/stackrace bench --cluster 198.18.0.1:6379 ...

Everything it made (namespaces, veths, bridge, Ray's processes, temp dirs) is removed on
Ctrl-C, SIGTERM, or — if it is killed — by its reaper. The topology is the tests' own
(tests/cluster/netns.py).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cluster.netns import Topology, sweep, unavailable  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("what", nargs="?", default="up", choices=["up", "sweep"])
    p.add_argument(
        "--wan",
        metavar="MS[,LOSS%]",
        help="the load hosts' links: this delay each way (and loss each way)",
    )
    args = p.parse_args()
    if args.what == "sweep":
        for prefix in sweep():
            print(f"removed {prefix}")
        return 0
    why = unavailable()
    if why:
        print(f"netns_cluster: {why}", file=sys.stderr)
        return 2
    sweep()
    topo = Topology(roles=("head", "load1", "load2", "app"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        topo.up()
        print("starting Ray on 4 hosts (~20 s)…", flush=True)
        topo.start_ray()
        if args.wan:
            delay, _, loss = args.wan.partition(",")
            for role in ("load1", "load2"):
                how = topo.slow(role, float(delay), float(loss or 0))
            print(f"load hosts: {delay} ms each way, {loss or 0} % loss each way ({how})")
        for role, host in topo.hosts.items():
            print(f"  {role:<8} {host.address:<14} namespace {host.netns}")
        head = f"ip netns exec {topo['head'].netns}"
        venv = ROOT / ".venv" / "bin"
        print(
            "\nOn the head host (the driver's):\n"
            f"  {head} {venv}/stackrace bench --cluster {topo.ray_address()} "
            "--stacks uvicorn,gunicorn-sync\n"
            f"  {head} {venv}/stackrace --cluster {topo.ray_address()}        # the app\n"
            "Ctrl-C takes it all down.",
            flush=True,
        )
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    finally:
        print("taking the topology down…", file=sys.stderr)
        topo.down()


if __name__ == "__main__":
    sys.exit(main())
