"""What capturing an evidence window costs a stack: its throughput with and without
capture running, interleaved A B B A rounds, the median of the per-pair ratios.

    .venv/bin/python bench/why_cost.py                # cpu_app, 2 workers, c=16
    .venv/bin/python bench/why_cost.py --app blocking_app --workers 1 -c 8 --rounds 8

The stack is gunicorn (sync workers) serving one of the catalogue's apps
(tests/apps/causes): `cpu_app` by default, a CPU-bound app on every core, where the
sampler's own CPU would show (a blocking app leaves the cores idle and hides it). Each
round loads it for `--seconds` with `stackrace load` (the real engine) and reads its
goodput from `--json`; in the B rounds `capture_window` runs back to back for the whole
round (the worst case: a window is a few seconds at a breaking point, not the whole
race). Rounds go A B B A (each pair compared in the same minute, so the machine's drift
cancels), and the cost printed is 1 − median(B / A) over the pairs, with each pair's
figure and an A/A spread (the first A against the last A of each group of four) to say
how large the noise is against it. The goal (docs/verdicts.md): ≤ 3 %.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from stackrace.base.ports import free_port  # noqa: E402  (after the path is set)
from stackrace.evidence.capture import CaptureTarget, capture_window  # noqa: E402
from stackrace.supervise.procs import die_with_parent  # noqa: E402

CAUSES = ROOT / "tests" / "apps" / "causes"
GUNICORN = str(Path(sys.executable).parent / "gunicorn")


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def start_server(app: str, workers: int) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        [GUNICORN, "--bind", f"127.0.0.1:{port}", "--workers", str(workers),
         "--no-control-socket", "--chdir", str(CAUSES), "--log-level", "warning",
         f"{app}:app"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, preexec_fn=die_with_parent(),
    )  # fmt: skip
    end = time.monotonic() + 20
    while not _listening(port):
        if proc.poll() is not None or time.monotonic() > end:
            raise SystemExit(f"why_cost: gunicorn did not start ({app})")
        time.sleep(0.1)
    return proc, port


async def one_round(
    pid: int, port: int, concurrency: int, seconds: float, capture: bool
) -> tuple[float, float]:
    """Goodput (answers a second) of one load round, with capture running or not, and
    the capture's own CPU (its py-spy processes and this process) in cores."""
    load = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "stackrace.cli", "load", f"http://127.0.0.1:{port}/",
        "-c", str(concurrency), "-d", f"{seconds}s", "--warmup", "1s", "--json",
        "--no-progress", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    cores = 0.0
    if capture:
        target = CaptureTarget(root_pid=pid, port=port, app_roots=(str(CAUSES),))
        # the load is reaped only after this: the children's figure is py-spy's alone
        kids0, self0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.process_time()
        start = time.monotonic()
        end = start + 1 + seconds
        while time.monotonic() < end - 1.0:
            await capture_window(
                target, stack="bench", level=concurrency, seconds=min(3.0, end - time.monotonic())
            )
        kids1, self1 = resource.getrusage(resource.RUSAGE_CHILDREN), time.process_time()
        used = kids1.ru_utime + kids1.ru_stime - kids0.ru_utime - kids0.ru_stime
        cores = (used + self1 - self0) / (time.monotonic() - start)
    out, _ = await load.communicate()
    total = json.loads(out)["total"]
    return float(total["ok"]) / float(total["seconds"]), cores


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--app", default="cpu_app", help="an app of tests/apps/causes")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("-c", "--concurrency", type=int, default=16)
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--rounds", type=int, default=8, help="rounds (a multiple of 4: ABBA)")
    a = p.parse_args()
    proc, port = start_server(a.app, a.workers)
    pattern = "ABBA" * max(1, a.rounds // 4)
    figures: list[tuple[str, float]] = []
    capture_cores: list[float] = []
    try:
        for kind in pattern:
            rps, cores = await one_round(proc.pid, port, a.concurrency, a.seconds, kind == "B")
            figures.append((kind, rps))
            if kind == "B":
                capture_cores.append(cores)
            used = f"  capture used {cores:.3f} cores" if kind == "B" else ""
            print(f"  {kind}  {rps:10,.0f} answers/s{used}", flush=True)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    ratios, noise = [], []
    for i in range(0, len(figures), 4):
        (_, a1), (_, b1), (_, b2), (_, a2) = figures[i : i + 4]
        ratios.append((b1 + b2) / (a1 + a2))
        noise.append(abs(a2 / a1 - 1))
    cost = 1 - statistics.median(ratios)
    print(
        f"{a.app}, {a.workers} gunicorn sync workers, c={a.concurrency}, {len(figures)} rounds "
        f"of {a.seconds:.0f} s (ABBA): capture costs {100 * cost:.1f} % of throughput "
        f"(per group: {', '.join(f'{100 * (1 - r):+.1f} %' for r in ratios)}; "
        f"A/A noise {100 * statistics.median(noise):.1f} %)"
    )
    share = statistics.median(capture_cores) / len(os.sched_getaffinity(0))
    print(
        f"the capture's own CPU: {statistics.median(capture_cores):.3f} cores (median of the "
        f"B rounds), {100 * share:.1f} % of this machine's {len(os.sched_getaffinity(0))} "
        "cores: the most it can take from a stack that uses them all"
    )


if __name__ == "__main__":
    asyncio.run(main())
