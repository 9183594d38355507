"""What each file of tests costs in ./dev test: wall seconds and CPU-seconds per lane.

    .venv/bin/python bench/suite_times.py            # the last ./dev test's JUnit files
    .venv/bin/python bench/suite_times.py --top 15   # the 15 costliest files of each lane

Reads `.stackrace/test-times/*.xml` (one per lane; each test's `time` and its `cpu_s`
property, tests/conftest.py). A file whose CPU is a small part of its wall time mostly
waits (a service time, a kill's grace): it belongs in the waiting lane, where it costs
the machine little; a file near one core belongs in a lane that keeps the cores busy
(bench/README.md "The test suite's own time").
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

TIMES = Path(".stackrace/test-times")


def per_file(junit: Path) -> dict[str, tuple[float, float, int]]:
    """{test file's module: (wall s, CPU s, tests)} of one lane's JUnit file."""
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for case in ET.parse(junit).iter("testcase"):
        module = case.get("classname", "?")
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        f = files[module]
        f[0] += float(case.get("time") or 0)
        f[1] += float(props.get("cpu_s") or 0)
        f[2] += 1
    return {m: (w, c, int(n)) for m, (w, c, n) in files.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--top", type=int, default=10, help="files shown per lane")
    ap.add_argument("--dir", type=Path, default=TIMES, help="where the JUnit files are")
    args = ap.parse_args()
    lanes = sorted(args.dir.glob("*.xml"))
    if not lanes:
        raise SystemExit(f"no JUnit file in {args.dir}: run ./dev test first")
    total_cpu = 0.0
    for junit in lanes:
        files = per_file(junit)
        wall = sum(w for w, _, _ in files.values())
        cpu = sum(c for _, c, _ in files.values())
        total_cpu += cpu
        share = cpu / wall if wall else 0.0
        print(f"{junit.stem}: {wall:.0f} s of tests, {cpu:.0f} CPU-s ({share:.2f} of a core)")
        for module, (w, c, n) in sorted(files.items(), key=lambda x: -x[1][0])[: args.top]:
            print(f"  {w:7.1f} s {c:7.1f} CPU-s {c / w if w else 0:5.2f}  {n:4d}  {module}")
    print(f"all lanes: {total_cpu:.0f} CPU-s")


if __name__ == "__main__":
    main()
