#!/usr/bin/env python3
"""The engine's C transport against TLS servers that misbehave (bench/tls_hostile_server.c).

    .venv/bin/python bench/tls_hostile.py [--seconds 2] [--asan] [MODE ...]

For each misbehaviour (the server's modes: plain HTTP instead of a ServerHello, silence,
a reset, a megabyte of junk records, a record longer than TLS allows, renegotiation
requests, floods of key updates, a truncated answer, close_notify instead of an answer,
an endless body; `ok` is the control), and each way of loading it (kept alive, a
connection per request, and that with --tls-resume), one engine Target runs in a
process of its own on uvloop, as the engine process runs it: c=8, `-k`, a 0.5 s
request and connect timeout, for
`--seconds`; then it is removed (what it still waits for is abandoned) and the loop
runs on until every connection has ended. Checked, and printed per run:

- the accounting: every request sent was answered or failed by a kind (and, once the
  target is removed, none is left waiting): sent == answered + failed;
- no leak of a connection's TLS state: the SSL objects the C transport made and has not
  freed (`_cycle.tls_alive()`) are 0 at the end, and the process's RSS grew by little
  between its first second and its end (a leak per connection shows there; not checked
  under --asan, whose quarantine holds on to freed memory by design);
- the failures by kind, and why the `tls` ones failed (OpenSSL's reasons).

`--asan`: the same runs on a copy of the sources whose _cycle.c is built with
AddressSanitizer (libasan preloaded; leaks are left to the checks above, Python's own
allocations at exit would drown them): an invalid read or write, a use after free or a
double free in the transport or in OpenSSL as it drives it aborts the run with a report.
The script exits 1 if any run fails a check.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODES = ["ok", "plain", "silent", "reset", "junk", "oversize", "renegotiate", "keyupdate",
         "truncate", "notify", "flood"]  # fmt: skip
CONCURRENCY = 8
TIMEOUT_S = 0.5


def build_server() -> Path:
    src = ROOT / "bench" / "tls_hostile_server.c"
    out = ROOT / ".stackrace" / "bench" / "tls_hostile_server"
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
        subprocess.run(["cc", "-O2", "-o", str(out), str(src), "-lssl", "-lcrypto"], check=True)
    return out


def asan_sources(tmp: Path) -> tuple[Path, dict[str, str]]:
    """A copy of src/ whose _cycle is built with AddressSanitizer; the environment to run
    it in (libasan preloaded: Python itself is not built with it)."""
    src = tmp / "src"
    shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    engine = src / "stackrace" / "engine"
    suffix = subprocess.run(
        [sys.executable, "-c", "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    include = subprocess.run(
        [sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-O1", "-g", "-fsanitize=address", "-fno-omit-frame-pointer",
         f"-I{include}", "-o", str(engine / f"_cycle{suffix}"), str(engine / "_cycle.c"),
         "-lssl", "-lcrypto", "-lnghttp2"],
        check=True,
    )  # fmt: skip
    libasan = subprocess.run(
        ["cc", "-print-file-name=libasan.so"], capture_output=True, text=True, check=True
    ).stdout.strip()
    env = {
        "PYTHONPATH": str(src),
        "LD_PRELOAD": libasan,
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1",
        "PYTHONMALLOC": "malloc",  # so ASan sees Python's buffers as what they are
    }
    return src, env


def rss_kb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def child(port: int, how: str, seconds: float) -> None:
    """One run, in this process: print one JSON line of what it found."""
    import uvloop

    from stackrace.engine import _cycle
    from stackrace.engine.model import RESPONSE_FAILURES, EngineSettings, TargetSpec
    from stackrace.engine.target import Target

    loop = uvloop.new_event_loop()
    asyncio.set_event_loop(loop)
    spec = TargetSpec(
        id="t",
        url=f"https://127.0.0.1:{port}/hello",
        concurrency=0,
        keepalive=how == "kept-alive",
        tls_verify=False,
        tls_resume=how == "resumed",
    )
    settings = EngineSettings(timeout=TIMEOUT_S, connect_timeout=TIMEOUT_S, retry_delay=0.01)
    target = Target(spec, settings, loop)
    counts = {"sent": 0, "answered": 0}
    kinds: dict[str, dict[str, int]] = {"failures": {}, "errors": {}}

    def take() -> int:
        r = target.take_report()
        counts["sent"] += r.sent
        counts["answered"] += r.requests
        for group, got in (("failures", r.failures), ("errors", r.errors)):
            for k, n in got.items():
                kinds[group][k] = kinds[group].get(k, 0) + n
        return r.waiting

    async def run() -> tuple[int, int, int]:
        target.set_rate(None)
        target.set_concurrency(CONCURRENCY)
        start = time.monotonic()
        rss_first = 0
        while time.monotonic() - start < seconds:
            await asyncio.sleep(0.1)
            target.sweep(time.perf_counter_ns())
            take()
            if not rss_first and time.monotonic() - start >= 1.0:
                rss_first = rss_kb()
        target.remove()
        for _ in range(20):  # failures reported on the loop's next turn, closes
            await asyncio.sleep(0.01)
        waiting = take()
        gc.collect()
        return waiting, rss_first or rss_kb(), rss_kb()

    waiting, rss_first, rss_end = loop.run_until_complete(run())
    loop.close()
    lost = sum(n for k, n in kinds["failures"].items() if k not in RESPONSE_FAILURES)
    print(
        json.dumps(
            {
                **counts,
                **kinds,
                "waiting": waiting,
                "balanced": counts["sent"] == counts["answered"] + lost + waiting,
                "tls_alive": _cycle.tls_alive(),
                "rss_growth_kb": rss_end - rss_first,
            }
        ),
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("modes", nargs="*", default=MODES, metavar="MODE")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--asan", action="store_true")
    ap.add_argument("--child", nargs=3, metavar=("PORT", "HOW", "SECONDS"),
                    help=argparse.SUPPRESS)  # fmt: skip
    args = ap.parse_args()
    if args.child:
        sys.path.insert(0, os.environ.get("PYTHONPATH") or str(ROOT / "src"))
        port, how, seconds = args.child
        child(int(port), how, float(seconds))
        return
    for mode in args.modes:
        if mode not in MODES:
            raise SystemExit(f"unknown mode {mode!r}: one of {', '.join(MODES)}")
    sys.path.insert(0, str(ROOT / "src"))
    from stackrace.stacks.certificate import ensure

    cert = ensure()
    server_bin = build_server()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ}
        if args.asan:
            _src, extra = asan_sources(Path(tmp))
            env.update(extra)
        failed = 0
        print(f"{'mode':<12}{'load':<11}{'sent':>7}{'answered':>9}{'waiting':>8}  "
              f"{'ssl left':>8}{'RSS +KB':>8}  failures; why (tls)")  # fmt: skip
        for mode in args.modes:
            for how in ("kept-alive", "per-request", "resumed"):
                from socket import socket

                with socket() as s:
                    s.bind(("127.0.0.1", 0))
                    port = s.getsockname()[1]
                server = subprocess.Popen(
                    [str(server_bin), str(port), str(cert.cert), str(cert.key), mode],
                    stdout=subprocess.PIPE,
                    start_new_session=True,
                )
                try:
                    assert server.stdout is not None
                    if server.stdout.readline().strip() != b"ready":
                        raise SystemExit(f"{mode}: the server did not start")
                    run = subprocess.run(
                        [sys.executable, __file__, "--child", str(port), how, str(args.seconds)],
                        capture_output=True, text=True, env=env, timeout=120 + 60 * args.asan,
                    )  # fmt: skip
                finally:
                    os.killpg(server.pid, 9)
                    server.wait()
                if run.returncode != 0 or not run.stdout.strip():
                    failed += 1
                    print(f"{mode:<12}{how:<11} CRASHED (exit {run.returncode})")
                    print("\n".join(run.stderr.splitlines()[-40:]))
                    continue
                r = json.loads(run.stdout.splitlines()[-1])
                ok = r["balanced"] and r["tls_alive"] == 0 and r["waiting"] == 0
                # a leak per connection: a few hundred connections a second, for seconds
                # (not under ASan: its quarantine keeps what is freed, by design)
                ok = ok and (args.asan or r["rss_growth_kb"] < 4096)
                failed += not ok
                why = "; ".join(f"{k} {n}" for k, n in sorted(r["errors"].items()))
                kinds = ", ".join(f"{k} {n}" for k, n in sorted(r["failures"].items()))
                print(
                    f"{mode:<12}{how:<11}{r['sent']:>7}{r['answered']:>9}{r['waiting']:>8}  "
                    f"{r['tls_alive']:>8}{r['rss_growth_kb']:>8}  {kinds or '-'}"
                    + (f"; {why}" if why else "")
                    + ("" if ok else "   <-- FAILED a check")
                )
    if failed:
        raise SystemExit(f"{failed} run(s) failed a check")


if __name__ == "__main__":
    main()
