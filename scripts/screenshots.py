"""Screenshots of the real app for the README: `screenshots/*.svg` (and the browser view
as `screenshots/web.png`).

    .venv/bin/python scripts/screenshots.py            # all of them, a few minutes
    .venv/bin/python scripts/screenshots.py --only race_io_c200

The race screenshots are the real app, the real engine and real servers on loopback:
gunicorn sync, gunicorn gevent, uvicorn and aiohttp, started by the launcher from
stacks.toml (and, for "Your app", the Flask example under the four common WSGI servers), at 200 connections on /io (10 ms) and on /hello; a ramp from a clean start
ending in its summary; projector mode. A stack that is not installed is left out (the
script says which). The browser view is `stackrace web` opened in headless Chromium.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.*

from stackrace.engine.client import Engine  # noqa: E402
from stackrace.engine.model import EngineSettings  # noqa: E402
from stackrace.race.core import RaceCore  # noqa: E402
from stackrace.race.session import RacePlan, Session  # noqa: E402
from stackrace.race.stacks import StacksSource  # noqa: E402
from stackrace.race_settings import RaceSettings  # noqa: E402
from stackrace.tui.app import StackraceApp  # noqa: E402
from stackrace.tui.slider import ConcurrencySlider  # noqa: E402

OUT = ROOT / "screenshots"
SIZE = (160, 45)
FOUR = ("gunicorn-sync", "gunicorn-gevent", "uvicorn", "aiohttp")


async def picker() -> None:
    source = StacksSource()
    plan = RacePlan(stacks=FOUR, settings=RaceSettings(workload="io"), concurrency=200)
    # the real session (its engine starts with a race only): the catalog as installed
    session = Session(RaceCore(Engine(EngineSettings(interval=0.25)), source, plan.settings))
    app = StackraceApp(session, plan, source.catalog(), tick_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.save_screenshot("picker.svg", str(OUT))


def installed(source: StacksSource) -> tuple[str, ...]:
    ok = {c.id for c in source.catalog() if c.available}
    missing = [s for s in FOUR if s not in ok]
    if missing:
        print(f"  not installed, left out: {', '.join(missing)}", file=sys.stderr)
    return tuple(s for s in FOUR if s in ok)


async def race(
    name: str,
    workload: str,
    levels: list[tuple[int, float]],
    *,
    ramp: tuple[int, float] | None = None,
    projector: bool = False,
    size: tuple[int, int] = SIZE,
) -> None:
    """Run the real app on the real stacks, set each (concurrency, seconds), save."""
    source = StacksSource()
    stacks = installed(source)
    settings = RaceSettings(workload=workload, io_ms=10, timeout=10.0)
    plan = RacePlan(stacks=stacks, settings=settings, concurrency=levels[0][0])
    engine = Engine(EngineSettings(interval=0.25, timeout=10.0), per_target=True)
    session = Session(RaceCore(engine, source, settings))
    app = StackraceApp(session, plan, [], show_picker=False, projector=projector)
    async with app.run_test(size=size) as pilot:
        while app.race is None or len(app.race.panes) < len(stacks):
            await asyncio.sleep(0.05)
        while not all(p.state in ("ready", "warming") for p in session.view().panes):
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)
        slider = app.race.query_one("#level", ConcurrencySlider)
        if ramp is not None:
            session.start_ramp(top=ramp[0], dwell=ramp[1])
            while session.ramp is not None:
                await asyncio.sleep(0.25)
            await asyncio.sleep(1.5)  # the summary opens by itself
        else:
            for level, seconds in levels:
                slider.value = level
                await asyncio.sleep(seconds)
        app.save_screenshot(f"{name}.svg", str(OUT))
        await pilot.press("escape", "q")


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
         str(ROOT / "tests" / "tui" / "test_web.py")],
        check=True,
        env=env,
        cwd=ROOT,
    )  # fmt: skip


async def your_app() -> None:
    """The README's "Your app": the Flask example under the four common WSGI servers,
    built the way `stackrace --app examples/flask_app:app --path /:3 --path /slow:1
    --go` builds it (the same command-line parser and session), at 50 connections."""
    from stackrace.cli import build_parser
    from stackrace.tui.app import build_session

    argv = ["--app", str(ROOT / "examples" / "flask_app:app"), "--path", "/:3"]
    args = build_parser().parse_args([*argv, "--path", "/slow:1", "-c", "10", "--go"])
    session, plan, catalog, _ = build_session(args)
    app = StackraceApp(session, plan, catalog, show_picker=False)
    async with app.run_test(size=SIZE) as pilot:
        while app.race is None or len(app.race.panes) < len(plan.stacks):
            await asyncio.sleep(0.05)
        while not all(p.state in ("ready", "warming") for p in session.view().panes):
            await asyncio.sleep(0.1)
        await asyncio.sleep(3.0)
        app.race.query_one("#level", ConcurrencySlider).value = 50
        await asyncio.sleep(8.0)
        app.save_screenshot("your_app_flask.svg", str(OUT))
        await pilot.press("q")


SHOTS = {
    "your_app_flask": lambda: your_app(),
    "picker": lambda: picker(),
    "race_io_c200": lambda: race("race_io_c200", "io", [(10, 4.0), (200, 10.0)]),
    "race_hello_c200": lambda: race("race_hello_c200", "hello", [(10, 3.0), (200, 8.0)]),
    "ramp_summary": lambda: race("ramp_summary", "io", [(1, 0.0)], ramp=(1000, 3.0)),
    "projector": lambda: race(
        "projector", "io", [(10, 3.0), (1000, 8.0)], projector=True, size=(160, 45)
    ),
    "web": lambda: web(),
}


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
