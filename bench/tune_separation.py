"""Does `tune` tell threads=4 from threads=32 on a busy box, every time, in 3 minutes?

    python bench/tune_separation.py [--runs 5] [--budget 3m] [--no-burners] [--tie]

Issue 47's check of `tune` on a busy dev box: gunicorn-gthread on `/io` with one
worker, threads 4 against 32 (their capacities differ by ~5×), beside two CPU burners
of 30 % of every core each (tests/servers/burner.py, as a build and a browser keep a
dev box) and whatever else the machine runs (`--share-cores`: other people's work is
the point, and the lines below say how busy it was). Each run must name a winner over
the other, and each re-run must name the same winner (or the same tie); a run that
says "tie" or "not decided" did not separate them.

`--tie` runs the other half of the check: two configurations of equal capacity (the
known server of bench/interval_coverage.py, 24 or 32 threads where 24 requests fit at
once) must come out "a tie within noise" every time, never a winner.

It prints one line per run (its verdict, each configuration's capacity, interval and
measurements, the time it took, the load average) and the count: "separated N of 5,
the same answer each time: yes/no". docs/tune.md keeps the last figure and the
command.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from interval_coverage import STACKS, burners

COMMAND = [
    "tune", "gunicorn-gthread", "--slo", "p99<50ms", "--workload", "io",
    "--workers", "1", "--threads", "4,32", "--share-cores", "--no-progress",
]  # fmt: skip
# `--tie`: two configurations of equal capacity, which must come out "a tie within
# noise": interval_coverage.py's known server (at most 24 requests at once), one
# worker with 24 threads or with 32: both serve 24 at once
TIE = [
    "tune", "known", "--slo", "p90<80ms", "--path", "/work", "--workers", "1",
    "--threads", "24,32", "--concurrency", "32", "--share-cores", "--no-progress",
]  # fmt: skip


def one(budget: str, out: Path, tie: bool = False) -> tuple[dict, float]:
    """One tune; its `tune` block and how long it took."""
    t0 = time.monotonic()
    args = COMMAND
    if tie:
        stacks = out.with_suffix(".toml")
        stacks.write_text(STACKS)
        args = ["--stacks-file", str(stacks), *TIE]
    r = subprocess.run(
        [sys.executable, "-m", "stackrace", *args, "--budget", budget, "--json", str(out)],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=1800,
    )  # fmt: skip
    took = time.monotonic() - t0
    if not out.exists():
        raise SystemExit(f"tune failed (exit {r.returncode}): {r.stdout[-800:]}{r.stderr[-2000:]}")
    return json.loads(out.read_text())["tune"], took


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--budget", default="3m")
    p.add_argument("--no-burners", action="store_true", help="the box as it is, no burners")
    p.add_argument(
        "--tie", action="store_true", help="two equal configurations: each run must say tie"
    )
    a = p.parse_args()
    answers = []
    separated = 0
    with tempfile.TemporaryDirectory() as d:
        ctx = burners(0) if a.no_burners else burners(2)
        with ctx:
            for k in range(a.runs):
                tune, took = one(a.budget, Path(d) / f"t{k}.json", a.tie)
                winner = tune.get("winner")
                separated += winner is not None
                tied = ", ".join(sorted(tune.get("tied") or []))
                said = "tie: " + tied if "tie within noise" in tune["verdict"] else "not decided"
                answers.append(winner or said)
                points = "; ".join(
                    f"{q['name'].split(':', 1)[-1]} {q['capacity']:,.0f} req/s"
                    + (
                        f" ({q['lo']:,.0f}–{q['hi']:,.0f})"
                        if q["repeats"] >= 2
                        else " (one round: no interval)"
                    )
                    + f", {q['repeats']} measurement{'s' if q['repeats'] != 1 else ''}"
                    for q in tune["points"]
                )
                load = os.getloadavg()[0]
                print(
                    f"run {k + 1}: {tune['verdict']} | {points} | {took:.0f} s, "
                    f"{tune.get('rounds', 0)} rounds, load average {load:.1f}",
                    flush=True,
                )
    same = len(set(answers)) == 1
    if a.tie:
        ties = sum(1 for x in answers if x.startswith("tie: ") and x != "tie: ")
        print(
            f"a tie said {ties} of {a.runs} (no winner named between equals); the same "
            f"answer each time: {'yes' if same else 'no'} ({', '.join(answers)})",
            flush=True,
        )
        return 0 if ties == a.runs else 1
    print(
        f"separated {separated} of {a.runs} (a winner named); the same answer each time: "
        f"{'yes' if same else 'no'} ({', '.join(answers)})",
        flush=True,
    )
    return 0 if separated == a.runs and same else 1


if __name__ == "__main__":
    sys.exit(main())
