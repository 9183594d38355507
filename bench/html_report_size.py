"""The HTML report's size and draw time (issue 49's goals: a 10-minute race of 6 stacks
in ≤ 250 KB drawn in < 1 s in headless Chromium; a 1-hour run under 1 MB).

The runs are synthetic (the demo's stack models, race/live/demo_model.py) but recorded
by the real `run_bench` and its series recorder, so every stack has one row a second for
the whole run — six stacks raced side by side (`--isolation parallel`), ten levels, each
level long enough to fill the time. The page is written by report/html.py as `bench
--html` writes it; the draw time is Chromium's own clock (performance.now() at the second
animation frame after the load event: parsed, laid out and painted), the median of
five openings from a file with the network off, printed beside the file sizes.

    .venv/bin/python bench/html_report_size.py            # 10 minutes and 1 hour
    .venv/bin/python bench/html_report_size.py --minutes 10 --keep /tmp/r10.html
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from stackrace.race.bench.driver import run_bench
from stackrace.race.bench.protocol import BenchPlan
from stackrace.race.live.demo import synthetic_parts
from stackrace.report import html
from stackrace.report.schema import BenchRun, dumps
from stackrace.settings.race_settings import RaceSettings
from stackrace.stacks.definition import Stack, StackDef

STACKS = ["gunicorn-sync", "gunicorn-gevent", "uvicorn", "aiohttp", "tornado", "go-nethttp"]
LEVELS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--proxy-server=127.0.0.1:9",
    "--window-size=1400,900", "--enable-logging=stderr", "--v=0",
]  # fmt: skip
# after the page's own load: two animation frames, so layout and paint are done
PROBE = (
    '<script>addEventListener("load",()=>requestAnimationFrame(()=>requestAnimationFrame('
    '()=>console.log("DRAWN "+performance.now().toFixed(1)))))</script>'
)


def synthetic_run(minutes: float) -> BenchRun:
    parts, _ = synthetic_parts()
    per_level = minutes * 60 / len(LEVELS)
    settings = RaceSettings(
        concurrency_levels=LEVELS, duration=per_level - 2, warmup=1.0, isolation="parallel"
    )
    plan = BenchPlan([Stack(n, n, StackDef(command=["true"], title=n)) for n in STACKS], settings)
    return asyncio.run(run_bench(plan, parts=parts))


def draw_ms(page: str, chromium: str, rounds: int = 5) -> list[float]:
    """Chromium's draw time of the page, each opening its own browser."""
    # the probe is one more script: the page's policy would refuse it (it allows its own)
    probed = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page)
    probed = probed.replace("</body>", PROBE + "</body>")
    out: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.html"
        path.write_text(probed)
        # Chromium sometimes writes the DOM out before the second frame (a fresh profile's
        # first opening): such an opening prints no figure and is tried again
        for _ in range(3 * rounds):
            if len(out) == rounds:
                break
            profile = f"--user-data-dir={tmp}/profile{time.monotonic_ns()}"
            r = subprocess.run(
                [chromium, *FLAGS, profile, "--dump-dom", path.as_uri()],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            found = re.search(r"DRAWN ([0-9.]+)", r.stderr)
            if found:
                out.append(float(found.group(1)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, action="append", help="run lengths (10 and 60)")
    ap.add_argument("--keep", help="write the (first) page here too")
    args = ap.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    for minutes in args.minutes or [10, 60]:
        t0 = time.perf_counter()
        run = synthetic_run(minutes)
        made = time.perf_counter() - t0
        t0 = time.perf_counter()
        page = html.page(run)
        built = time.perf_counter() - t0
        if args.keep:
            Path(args.keep).write_text(page)
            args.keep = None
        rows = sum(len(st.series or []) for st in run.stacks)
        print(
            f"{minutes:g} min, {len(run.stacks)} stacks, {rows:,} rows ({made:.1f} s to race "
            f"the models): JSON {len(dumps(run)) / 1024:,.0f} KB, HTML "
            f"{len(page.encode()) / 1024:,.0f} KB built in {built * 1000:.0f} ms"
        )
        if chromium is None:
            print("  no chromium on PATH: draw time not measured (apt-get install chromium)")
            continue
        times = draw_ms(page, chromium)
        if times:
            print(
                f"  drawn in headless Chromium: median {statistics.median(times):.0f} ms, "
                f"max {max(times):.0f} ms ({len(times)} openings, network off)"
            )
        else:
            print("  Chromium printed no draw time")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
