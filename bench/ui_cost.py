"""What the live comparator costs, and how fast it answers.

    .venv/bin/python bench/ui_cost.py                 # both measurements
    .venv/bin/python bench/ui_cost.py --cpu-seconds 20 --panes 8

1. UI CPU: the app with N panes (synthetic, deterministic stream) updating at 4 Hz,
   run headless for a while; the figure is this process's CPU time / wall time.
   Goal: <= 10% of one core with 8 panes.
2. Slider to figures: the real engine against real servers (tests/servers/testserver.py,
   10 ms per request); the slider jumps between 2 and 50 connections and we time how
   long until every pane's req/s figure shows the new load (more than 3x, or less than
   a third, of the figure before). Goal: < 1 s.

Headless means Textual renders every frame but writes it nowhere, so a real terminal
adds the cost of writing the escape codes (small next to rendering).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.helpers

from stackrace.race.core.core import RaceCore
from stackrace.race.core.plan import RacePlan
from stackrace.race.core.urls import UrlTarget
from stackrace.race.live.demo import CATALOG, MODELS, SyntheticEngine, demo_session
from stackrace.race.live.session import Session
from stackrace.settings.race_settings import RaceSettings
from stackrace.tui.app import StackraceApp


async def ui_cpu(seconds: float, panes: int) -> float:
    # steady state: stacks that do not crash, measured once every one has started and
    # warmed up (the state changes restyle a pane once; they are not the 4 Hz cost)
    steady = [k for k, m in MODELS.items() if m.crash_at is None]
    stacks = tuple(steady[:panes])
    session = demo_session()
    engine = session.engine
    assert isinstance(engine, SyntheticEngine)  # stepped by the app, one step a tick
    plan = RacePlan(stacks=stacks, settings=RaceSettings(workload="io"), concurrency=100)
    app = StackraceApp(session, plan, list(CATALOG), show_picker=False, drive=engine.step)
    async with app.run_test(size=(200, 60)) as pilot:
        await asyncio.sleep(8.0)  # panes mounted, stacks started and warmed, layout done
        assert app.race is not None and len(app.race.panes) == len(stacks)
        cpu0, wall0 = time.process_time(), time.monotonic()
        await asyncio.sleep(seconds)
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        await pilot.press("q")
    return 100.0 * cpu / wall


async def slider_latency(rounds: int) -> list[float]:
    from stackrace.engine.client import Engine
    from stackrace.engine.model import EngineSettings
    from stackrace.tui.bignum import BigNumber
    from stackrace.tui.slider import LevelSlider
    from tests.helpers import TestServer

    servers = [TestServer(), TestServer()]
    try:
        plan = RacePlan(
            urls=tuple(UrlTarget(s.url("/delay?ms=10"), pid=s.proc.pid) for s in servers),
            concurrency=2,
        )
        engine = Engine(EngineSettings(interval=0.25), per_target=True)
        session = Session(RaceCore(engine, None, plan.settings))
        app = StackraceApp(session, plan, [], show_picker=False)
        delays = []
        async with app.run_test(size=(160, 48)) as pilot:
            while app.race is None or len(app.race.panes) < 2:
                await asyncio.sleep(0.05)
            race = app.race
            slider = race.query_one("#level", LevelSlider)
            await asyncio.sleep(2.0)
            for i in range(rounds):
                target = 50 if i % 2 == 0 else 2
                digits = [p.query_one("#qps", BigNumber) for p in race.panes.values()]
                before = [float(d.value.replace(",", "") or 0) for d in digits]
                t0 = time.monotonic()
                slider.value = target
                while time.monotonic() - t0 < 5.0:
                    now = [float(d.value.replace(",", "") or 0) for d in digits]
                    pairs = zip(now, before, strict=True)
                    up = target == 50
                    if all((n > 3 * b) if up else (n < b / 3) for n, b in pairs):
                        delays.append(time.monotonic() - t0)
                        break
                    await asyncio.sleep(0.01)
                else:
                    delays.append(float("inf"))
                await asyncio.sleep(1.5)
            await pilot.press("q")
        return delays
    finally:
        for s in servers:
            s.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu-seconds", type=float, default=15.0)
    parser.add_argument("--panes", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--skip-cpu", action="store_true")
    parser.add_argument("--skip-slider", action="store_true")
    args = parser.parse_args()
    if not args.skip_cpu:
        pct = asyncio.run(ui_cpu(args.cpu_seconds, args.panes))
        verdict = "ok" if pct <= 10 else "OVER the 10% goal"
        print(f"UI CPU, {args.panes} panes at 4 Hz: {pct:.1f}% of one core ({verdict})")
    if not args.skip_slider:
        delays = asyncio.run(slider_latency(args.rounds))
        shown = ", ".join(f"{d * 1000:.0f}" for d in delays)
        worst = max(delays)
        verdict = "ok" if worst < 1.0 else "OVER the 1 s goal"
        print(
            f"slider move to figures changed: median {statistics.median(delays) * 1000:.0f} ms, "
            f"worst {worst * 1000:.0f} ms ({verdict}); rounds [ms]: {shown}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
