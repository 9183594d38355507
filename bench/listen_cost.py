"""What the kernel's view of the stacks' ports costs the app (stacks/listen.py).

The race asks once a second, for every stack at once, off the UI's event loop. The dump
walks every TCP socket the kernel holds, TIME-WAIT ones too, so the cost grows with the
machine's sockets, not with the stacks: this prints the median and worst of 50 dumps and
how many sockets there were.

    .venv/bin/python bench/listen_cost.py
"""

from __future__ import annotations

import socket
import statistics
import time
from pathlib import Path

from stackrace.stacks.listen import listen_states


def main() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(128)
        ports = [s.getsockname()[1], *range(20000, 20007)]  # one listening, 7 not
        times = []
        for _ in range(50):
            t0 = time.perf_counter()
            listen_states(ports)
            times.append((time.perf_counter() - t0) * 1000)
    lines = sum(len(Path(f"/proc/net/{n}").read_text().splitlines()) - 1 for n in ("tcp", "tcp6"))
    print(f"TCP sockets on this machine: {lines:,}")
    print(f"one dump for {len(ports)} ports: median {statistics.median(times):.2f} ms, "
          f"max {max(times):.2f} ms (50 dumps)")  # fmt: skip


if __name__ == "__main__":
    main()
