"""Screenshots of the real app for the README: `screenshots/*.svg`.

    .venv/bin/python scripts/screenshots.py            # all of them, ~1 minute
    .venv/bin/python scripts/screenshots.py --only race_io_c500

The race screenshots are the real app, the real engine and real servers on loopback:
gunicorn sync against uvicorn on /io (10 ms), started by the launcher from stacks.toml.
Where those stacks are not installed, a blocking one-request-at-a-time server (the
shape of one gunicorn sync worker, tests/tui/servers/sync_server.py) and the asyncio
test server (tests/servers/testserver.py) stand in, loaded as `--url` targets.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.helpers

from stackrace.engine.client import Engine  # noqa: E402
from stackrace.engine.model import EngineSettings  # noqa: E402
from stackrace.race.core import RaceCore  # noqa: E402
from stackrace.race.demo import demo_session  # noqa: E402
from stackrace.race.session import RacePlan, Session  # noqa: E402
from stackrace.race.stacks import StacksSource  # noqa: E402
from stackrace.race.urls import UrlTarget  # noqa: E402
from stackrace.race_settings import RaceSettings  # noqa: E402
from stackrace.tui.app import StackraceApp  # noqa: E402
from stackrace.tui.slider import ConcurrencySlider  # noqa: E402
from tests.helpers import TestServer  # noqa: E402

OUT = ROOT / "screenshots"
SIZE = (160, 48)
SYNC_SERVER = ROOT / "tests" / "tui" / "servers" / "sync_server.py"


async def picker() -> None:
    catalog = StacksSource().catalog()
    app = StackraceApp(demo_session(), RacePlan(), catalog, tick_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.save_screenshot("picker.svg", str(OUT))


async def race(name: str, levels: list[tuple[int, float]], ramp: bool = False) -> None:
    """Run the real app, set each (concurrency, seconds) in turn, save the screen."""
    launcher = StacksSource()
    wanted = ("gunicorn-sync", "uvicorn")
    ok = {c.id for c in launcher.catalog() if c.available}
    settings = RaceSettings(workload="io", io_ms=10, timeout=5.0)
    if set(wanted) <= ok:
        plan = RacePlan(stacks=wanted, settings=settings, concurrency=levels[0][0])
        engine = Engine(EngineSettings(timeout=5.0), per_target=True)
        await _race(name, plan, Session(RaceCore(engine, launcher, settings)), levels, ramp)
        return
    blocking, asyncio_server = TestServer(SYNC_SERVER), TestServer()
    try:
        plan = RacePlan(
            urls=(
                UrlTarget(
                    f"http://127.0.0.1:{blocking.port}/io?ms=10",
                    pid=blocking.proc.pid,
                    name="blocking (1 worker)",
                ),
                UrlTarget(
                    asyncio_server.url("/delay?ms=10"),
                    pid=asyncio_server.proc.pid,
                    name="asyncio",
                ),
            ),
            settings=settings,
            concurrency=levels[0][0],
        )
        engine = Engine(EngineSettings(interval=0.25, timeout=5.0), per_target=True)
        session = Session(RaceCore(engine, None, settings))
        await _race(name, plan, session, levels, ramp)
    finally:
        blocking.kill()
        asyncio_server.kill()


async def _race(
    name: str, plan: RacePlan, session: Session, levels: list[tuple[int, float]], ramp: bool
) -> None:
    app = StackraceApp(session, plan, [], show_picker=False)
    async with app.run_test(size=SIZE) as pilot:
        while app.race is None or len(app.race.panes) < 2:
            await asyncio.sleep(0.05)
        while not all(p.state == "ready" for p in session.view().panes):
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)
        slider = app.race.query_one("#level", ConcurrencySlider)
        if ramp:
            session.start_ramp(top=levels[-1][0], dwell=levels[-1][1])
            while session.ramp is not None:
                await asyncio.sleep(0.25)
            await asyncio.sleep(1.0)
            await pilot.press("t")
            await pilot.pause()
        else:
            for level, seconds in levels:
                slider.value = level
                await asyncio.sleep(seconds)
            await pilot.press("a")  # every stack on the latency chart
            await asyncio.sleep(0.6)
        app.save_screenshot(f"{name}.svg", str(OUT))
        await pilot.press("escape", "q")


SHOTS = {
    "picker": lambda: picker(),
    "race_io_c10": lambda: race("race_io_c10", [(10, 6.0)]),
    "race_io_c500": lambda: race("race_io_c500", [(10, 3.0), (500, 8.0)]),
    "summary_ramp": lambda: race("summary_ramp", [(1, 0.0), (200, 2.0)], ramp=True),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted(SHOTS), action="append")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    for name in args.only or SHOTS:
        asyncio.run(SHOTS[name]())
        print(f"screenshots/{name}.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
