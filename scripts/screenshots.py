"""Screenshots of the real app for the README: `screenshots/*.svg` (and the browser view
as `screenshots/web.png`, the HTML report as `screenshots/html_report.png`).

    .venv/bin/python scripts/screenshots.py            # all of them, a few minutes
    .venv/bin/python scripts/screenshots.py --only race_io_c200

The race screenshots are the real app (opened from a command line, as `stackrace`
opens it), the real engine and real servers on loopback: gunicorn sync, gunicorn
gevent, uvicorn and aiohttp on the one core the engines leave, at 200 connections on
/io (10 ms) and on /hello; gunicorn sync wedged at c=1 after c=1000; a ramp right after
an overload, from a clean start, ending in its summary; projector mode at 100×30; a
seed preset with the classic experiment's figures and claims beside the panes; Go and
Hypercorn over HTTP/1.1 and h2c side by side (h1-vs-h2); the
Flask example (examples/flask_app) under the four common WSGI servers ("Your app"). The
browser view is `stackrace web` opened in headless Chromium; `html_report.png` is a real
`bench --html` page drawn by it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.*

from textual.widgets import DataTable  # noqa: E402

from stackrace.cli import build_parser  # noqa: E402
from stackrace.commands.app import make_app  # noqa: E402
from stackrace.commands.app_args import app_options  # noqa: E402
from stackrace.tui.app import StackraceApp  # noqa: E402
from stackrace.tui.dialogs import SummaryScreen  # noqa: E402
from stackrace.tui.slider import LevelSlider  # noqa: E402

OUT = ROOT / "screenshots"
SIZE = (160, 45)
FOUR = ("gunicorn-sync", "gunicorn-gevent", "uvicorn", "aiohttp")


def app_for(argv: list[str]) -> StackraceApp:
    """The app for a command line, as `stackrace ARGV` opens it (commands.app.make_app)."""
    parser = build_parser()
    parser.set_defaults(argv=list(argv))  # as cli.py does: the line, for a crash log
    args = parser.parse_args(argv)
    return make_app(app_options(args))


async def picker() -> None:
    app = app_for(["--stacks", ",".join(FOUR), "--workload", "io", "-c", "200"])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.5)
        app.save_screenshot("picker.svg", str(OUT))


async def ready(app: StackraceApp) -> None:
    """Until every pane's stack is up and loaded."""
    while app.race is None or app.race.last_view is None:
        await asyncio.sleep(0.1)
    while not all(
        p.state in ("ready", "warming") and p.target is not None for p in app.race.last_view.panes
    ):
        await asyncio.sleep(0.1)


async def race(
    name: str,
    argv: list[str],
    levels: list[tuple[int, float]],
    *,
    ramp: tuple[int, float] | None = None,
    size: tuple[int, int] = SIZE,
    until=None,  # type: ignore[no-untyped-def]
) -> None:
    """Run the real app on the real stacks, set each (level, seconds), save."""
    app = app_for(argv)
    async with app.run_test(size=size) as pilot:
        await ready(app)
        await asyncio.sleep(1.0)
        assert app.race is not None
        slider = app.race.query_one("#level", LevelSlider)
        for level, seconds in levels:
            slider.value = level
            await asyncio.sleep(seconds)
        if ramp is not None:
            app.session.start_ramp(top=ramp[0], dwell=ramp[1])
            while not app.session.ramp_finished:
                await asyncio.sleep(0.25)
            # the summary opens by itself; its table is filled once laid out
            while not (
                isinstance(app.screen, SummaryScreen) and app.screen.query_one(DataTable).row_count
            ):
                await asyncio.sleep(0.25)
            await asyncio.sleep(1.0)
        if until is not None:
            while not until(app):
                await asyncio.sleep(0.25)
            await asyncio.sleep(1.0)
        app.save_screenshot(f"{name}.svg", str(OUT))
        await pilot.press("escape", "q")


def wedged(app: StackraceApp) -> bool:
    view = app.race.last_view if app.race is not None else None
    return view is not None and any(p.wedged and p.verdict for p in view.panes)


async def web() -> None:
    """`stackrace web` in headless Chromium, through the browser test (it saves the PNG)."""
    import os
    import subprocess

    env = {
        **os.environ,
        "STACKRACE_WEB_SCREENSHOT": str(OUT / "web.png"),
        "STACKRACE_WEB_REAL": "1",
    }
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         str(ROOT / "tests" / "e2e" / "test_web.py")],
        check=True,
        env=env,
        cwd=ROOT,
    )  # fmt: skip


async def html_report() -> None:
    """A real `bench --html` (gunicorn sync and uvicorn on /io at 10, 100 and 500
    connections, 10 s a level), its page drawn by headless Chromium with no network."""
    import shutil
    import subprocess
    import tempfile

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("html_report: chromium is not installed (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "r.html"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "stackrace",
                "bench",
                "--stacks",
                "gunicorn-sync,uvicorn",
                "--workload",
                "io",
                "--concurrency",
                "10,100,500",
                "--duration",
                "10s",
                "--no-progress",
                "--html",
                str(page),
            ],
            check=False,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
        )  # fmt: skip (exit 1: a stack broke, as gunicorn sync does)
        if not page.exists():
            raise SystemExit("html_report: bench wrote no page (its error is above)")
        from tests.e2e.test_web import CHROMIUM_FLAGS

        subprocess.run(
            [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp}/profile", "--window-size=1100,1250",
             "--force-device-scale-factor=1", f"--screenshot={OUT / 'html_report.png'}",
             page.as_uri()],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip


IO4 = ["--stacks", ",".join(FOUR), "--workload", "io", "--go"]
SHOTS = {
    "picker": lambda: picker(),
    # the README's "Your app": the Flask example under the four common WSGI servers
    "your_app_flask": lambda: race(
        "your_app_flask",
        ["--app", str(ROOT / "examples" / "flask_app:app"), "--path", "/:3",
         "--path", "/slow:1", "-c", "10", "--go"],
        [(50, 8.0)],
    ),
    # four stacks on the one core the engines leave: the shared core is the verdict
    "race_io_c200": lambda: race("race_io_c200", [*IO4, "-c", "10"], [(200, 12.0)]),
    "race_hello_c200": lambda: race(
        "race_hello_c200", ["--stacks", ",".join(FOUR), "--workload", "hello", "--go"],
        [(200, 10.0)],
    ),
    # c=1000, then c=1: the sync worker answers nothing while its queue drains
    "wedged_sync": lambda: race(
        "wedged_sync",
        ["--stacks", "gunicorn-sync,uvicorn", "--workload", "io", "--io-ms", "100",
         "-c", "1000", "--go"],
        [(1000, 8.0), (1, 0.5)], until=wedged,
    ),
    # r right after an overload: a clean start, then every level to the top
    "ramp_summary": lambda: race(
        "ramp_summary", [*IO4, "-c", "10"], [(1000, 5.0)], ramp=(2000, 3.0)
    ),
    "projector": lambda: race(
        "projector", [*IO4, "-c", "10", "--big"], [(200, 8.0)], size=(100, 30)
    ),
    # a classic experiment replayed: its figures and claims beside the live panes
    "seed_then_now": lambda: race(
        "seed_then_now", ["--preset", "seed-002-concurrency-ceilings", "--go"],
        [(10, 6.0), (100, 8.0)], size=(200, 55),
    ),
    # HTTP/1.1 beside HTTP/2 on the same servers: each pane says its protocol, the
    # status line how the 100 in flight are split (h1-vs-h2's level)
    "h1_vs_h2": lambda: race("h1_vs_h2", ["--preset", "h1-vs-h2", "--go"], [(100, 10.0)],
                             size=(200, 50)),
    "web": lambda: web(),
    # `bench --html`: the page a team hands on, drawn by headless Chromium
    "html_report": lambda: html_report(),
}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted(SHOTS), action="append")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    for name in args.only or SHOTS:
        asyncio.run(SHOTS[name]())
        print(f"screenshots/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
