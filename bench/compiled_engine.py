#!/usr/bin/env python3
"""The engine's hot path compiled with mypyc, measured against the pure-Python engine.

    .venv/bin/python bench/compiled_engine.py [--rounds 3] [--duration 5] [-c 50]
                                              [--keep DIR] [--build-only]

Issue 26 asks for a new connection per request at wrk's cost (≥ 1.0× its connections a
second, ≤ 1.1× its CPU per connection). The pure-Python engine is at ~0.86–0.91× and
~1.18× (README, engine section): the kernel's share per connection equals wrk's, and the
gap is ~8 µs of interpreter time spread over ~25 Python calls. This script measures what
compiling the *same source* buys, without a second implementation whose accounting could
drift from the first: it copies src/ to a scratch directory, makes four edits mypyc
needs (listed in EDITS; each must apply), compiles the four modules on the per-request
path (engine/transport.py, connection.py, target.py, mix.py) with the mypyc that ships
with the test extra's mypy, and runs bench/connect_rate.py and bench/engine_vs_wrk.py
with `--baseline-src` pointing at the compiled copy, so the row "stackrace (baseline)"
is the compiled engine and "stackrace" the installed pure-Python one, in the same rounds.

Needs a C compiler and Python's headers (python3-dev), plus what the two benchmarks need
(go, wrk, taskset). Nothing in the checkout changes; `--keep DIR` leaves the compiled copy
there (otherwise it is removed).

Measured on 2026-11-25 (2-core VM, results/compiled_engine-2026-11-25.txt): see the
README's engine section.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULES = (
    "stackrace/engine/transport.py",
    "stackrace/engine/connection.py",
    "stackrace/engine/mix.py",
    "stackrace/engine/target.py",
)
# (file, old, new): what mypyc cannot compile as written, changed in the copy only
EDITS: tuple[tuple[str, str, str], ...] = (
    # a native class cannot derive from asyncio.Protocol; the loop's transports only
    # call the methods, they do not check the class
    ("stackrace/engine/connection.py", "class Connection(asyncio.Protocol):", "class Connection:"),
    # one name per class-level assignment, typed
    (
        "stackrace/engine/connection.py",
        "    on_url = on_header = on_headers_complete = on_status = None\n"
        "    on_chunk_header = on_chunk_complete = None\n",
        "".join(
            f"    {n}: None = None\n"
            for n in (
                "on_url",
                "on_header",
                "on_headers_complete",
                "on_status",
                "on_chunk_header",
                "on_chunk_complete",
            )
        ),
    ),
    # an attribute in the base and a method in the subclass (CheckedConnection.on_body)
    (
        "stackrace/engine/connection.py",
        "    on_body: Callable[[bytes], None] | None = None"
        "  # a checked connection keeps the body\n",
        "",
    ),
    # a class-level alias of a method
    (
        "stackrace/engine/transport.py",
        "    abort = close\n",
        "    def abort(self) -> None:\n        self.close()\n",
    ),
    # the loop's create_connection is typed for asyncio.Protocol subclasses
    (
        "stackrace/engine/target.py",
        "await self.loop.create_connection(lambda: conn, sock=sock)\n",
        "await self.loop.create_connection(lambda: conn, sock=sock)  # type: ignore[type-var]\n",
    ),
)


def build(out: Path) -> Path:
    """A compiled copy of src/ under `out`; returns its src directory."""
    src = out / "src"
    shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    for name, old, new in EDITS:
        path = src / name
        text = path.read_text()
        if old not in text:
            raise SystemExit(
                f"compiled_engine: {name} changed; this edit no longer applies: {old!r}"
            )
        path.write_text(text.replace(old, new, 1))
    mypyc = Path(sys.executable).with_name("mypyc")
    if not mypyc.exists():
        raise SystemExit("compiled_engine: mypyc not found beside this Python (the test extra)")
    r = subprocess.run([str(mypyc), *MODULES], cwd=src, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"compiled_engine: mypyc failed:\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    for m in MODULES:
        stem = (src / m).with_suffix("")
        if not list(stem.parent.glob(stem.name + ".cpython-*.so")):
            raise SystemExit(f"compiled_engine: no extension module for {m}")
    return src


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("-c", "--concurrency", type=int, default=50)
    ap.add_argument("--keep", metavar="DIR", help="build into DIR and leave it there")
    ap.add_argument("--build-only", action="store_true", help="build, print the path, stop")
    args = ap.parse_args()
    out = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="stackrace-mypyc-"))
    try:
        print(f"building the compiled engine in {out} …", flush=True)
        src = build(out)
        print(f"compiled: {', '.join(MODULES)} → {src}", flush=True)
        if args.build_only:
            return
        common = ["--rounds", str(args.rounds), "--duration", str(args.duration)]
        common += ["-c", str(args.concurrency), "--baseline-src", str(src)]
        for script, what in (
            ("connect_rate.py", "a new connection per request"),
            ("engine_vs_wrk.py", "keep-alive"),
        ):
            print(f"\n== {what}: 'stackrace (baseline)' is the compiled engine", flush=True)
            subprocess.run([sys.executable, str(ROOT / "bench" / script), *common], check=True)
    finally:
        if not args.keep and not args.build_only:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
