"""Does the next run's figure fall inside the printed 90 % interval 9 times in 10?

    python bench/interval_coverage.py [--runs 11] [--budget 40s] [--busy-only | --quiet-only]

The claim docs/tune.md makes of every interval `tune` prints (rules/confidence.py
`estimate`: from the spread between independent interleaved rounds, never from within
one measurement), checked the only way it can be: run the same tune again, in the same
conditions, and count how often each configuration's new figure (the median of its
rounds) falls inside the interval the run before printed for it. On a quiet box and on
a busy one (two CPU burners of 30 % each on every core: tests/servers/burner.py, as a
build and a browser keep a dev box).

The tune is tests/integration/test_tune.py's known surface (tests/servers/
fixed_capacity.py: workers 1,2 × threads 8,32, each request 20 ms + 8 ms a worker past
the first, at most 24 at once; 400 to 1,200 req/s), with a short budget so that a pair
of runs takes about a minute and a half: `--runs N` tunes in a row make N − 1 checks per
configuration that had an interval (two rounds or more) in the earlier run. The points
with one round (no interval printed) are counted apart: they claim nothing.

It prints one line per run and the coverage per condition; docs/tune.md keeps the last
figures (and what was run to get them). It shares the box with whatever else runs
(`--share-cores`): a busy box is the point.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STACKS = """
[stacks.known]
title = "workers x threads slots (at most 24), 20 ms + 8 ms a worker past the first"
language = "python"
family = "async"
command = ["{python}", "{root}/tests/servers/fixed_capacity.py", "{port}",
           "--workers", "{workers}", "--threads", "{threads}", "--ms", "20",
           "--overhead-ms", "8", "--cap", "24"]
workers = 1
threads = 1
"""


@contextlib.contextmanager
def burners(n: int, share: float = 0.3, seconds: float = 1800) -> Iterator[None]:
    """`n` burners, each `share` of every core (bounded in time: never left behind)."""
    procs = []
    try:
        for _ in range(n):
            p = subprocess.Popen(
                [sys.executable, str(ROOT / "tests/servers/burner.py"), "--share", str(share),
                 "--seconds", str(seconds)],
                stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
            )  # fmt: skip
            procs.append(p)
            assert p.stdout is not None and p.stdout.readline().strip() == b"burning"
        yield
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=10)


def tune(stacks: Path, out: Path, budget: str) -> dict[str, dict]:
    """One tune; each point by name ({capacity, lo, hi, repeats})."""
    r = subprocess.run(
        [sys.executable, "-m", "stackrace", "--stacks-file", str(stacks), "tune", "known",
         "--slo", "p90<80ms", "--path", "/work", "--workers", "1,2", "--threads", "8,32",
         "--concurrency", "32", "--precision", "50%", "--duration", "0.5s",
         "--budget", budget, "--share-cores", "--no-progress", "--json", str(out)],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=900,
    )  # fmt: skip
    if not out.exists():
        raise SystemExit(f"tune failed: {r.stdout[-500:]}{r.stderr[-2000:]}")
    run = json.loads(out.read_text())
    return {p["name"]: p for p in run["tune"]["points"]}


def condition(label: str, runs: int, budget: str, stacks: Path, tmp: Path) -> tuple[int, int]:
    """Hits and checks over `runs` tunes in a row (the load average before and after:
    other people's work on the box is part of the conditions, and is said)."""
    print(f"{label}: load average {os.getloadavg()[0]:.1f} at the start", flush=True)
    hits = checks = single = 0
    before: dict[str, dict] | None = None
    for k in range(runs):
        now = tune(stacks, tmp / f"{label}-{k}.json", budget)
        line = []
        if before is not None:
            for name, p in before.items():
                if name not in now or now[name]["capacity"] <= 0:
                    continue
                if p["repeats"] < 2:
                    single += 1
                    continue
                inside = p["lo"] <= now[name]["capacity"] <= p["hi"]
                hits, checks = hits + inside, checks + 1
                line.append(
                    f"{name.split(':')[1]} {p['lo']:,.0f}–{p['hi']:,.0f} → "
                    f"{now[name]['capacity']:,.0f} {'in' if inside else 'OUT'}"
                )
        empty = "(first run)" if before is None else "(no interval the run before to check)"
        print(f"{label} run {k + 1}: " + ("; ".join(line) or empty), flush=True)
        before = now
    print(
        f"{label}: the next run's figure inside the printed 90 % interval {hits} of "
        f"{checks} times ({100 * hits / max(1, checks):.0f} %); {single} figures of one "
        f"round had no interval; load average {os.getloadavg()[0]:.1f} at the end",
        flush=True,
    )
    return hits, checks


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=11)
    p.add_argument("--budget", default="40s")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--busy-only", action="store_true")
    which.add_argument("--quiet-only", action="store_true")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        stacks = tmp / "stacks.toml"
        stacks.write_text(STACKS)
        if not a.busy_only:
            condition("quiet", a.runs, a.budget, stacks, tmp)
        if not a.quiet_only:
            with burners(2):
                condition("busy (two 30 % burners)", a.runs, a.budget, stacks, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
