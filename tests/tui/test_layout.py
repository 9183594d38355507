"""Readable at every size: what each pane keeps on 100×30, 160×45 and 220×60, big figures
that grow, shared sparkline scales, projector mode, units on every figure."""

from __future__ import annotations

import pytest

from stackrace.race.live.demo import MODELS
from stackrace.tui.bignum import BigNumber, block_lines, glyph_rows, layout
from stackrace.tui.pane import QPS_EVERY, StackPane
from stackrace.tui.slider import LevelSlider
from stackrace.tui.spark import ScaledSparkline, bars
from tests.tui.conftest import open_race, plan

EIGHT = tuple(list(MODELS)[:8])


async def sized_race(size: tuple[int, int], stacks: tuple[str, ...], concurrency: int = 200):
    async for race in open_race(plan(stacks=stacks, concurrency=concurrency), size=size, settle=30):
        yield race


def visible_in(pane: StackPane, selector: str) -> bool:
    """Displayed, at least one row tall, and inside the pane's region on screen."""
    w = pane.query_one(selector)
    if not w.display or w.region.height < 1:
        return False
    return pane.region.contains_region(w.region)


@pytest.mark.parametrize(
    ("size", "n"),
    [((100, 30), 4), ((100, 30), 8), ((160, 45), 5), ((160, 45), 8), ((220, 60), 4)],
)
async def test_every_pane_keeps_req_s_p99_failures_and_memory(size, n):
    async for race in sized_race(size, EIGHT[:n]):
        panes = list(race.screen.panes.values())
        assert len(panes) == n
        for pane in panes:
            if pane.has_class("-crashed"):
                continue
            for part in ("#qps", "#latency", "#failures", "#memory"):
                assert visible_in(pane, part), (size, n, pane.pane_id, part)
            # every figure carries its unit
            assert race.screen.query_one(f"#pane-{pane.pane_id} #qps", BigNumber).unit.startswith(
                "req/s"
            )
            latency = race.text(f"#pane-{pane.pane_id} #latency")
            assert "p99" in latency and any(u in latency for u in ("ms", "µs", "s"))
            assert "MiB" in race.text(f"#pane-{pane.pane_id} #memory")


async def test_slider_keeps_every_label_at_100_columns():
    async for race in sized_race((100, 30), EIGHT[:4]):
        scale = str(race.screen.query_one("#level", LevelSlider).render()).split("\n")[1]
        for label in (
            "1",
            "2",
            "5",
            "10",
            "20",
            "50",
            "100",
            "200",
            "500",
            "1k",
            "2k",
            "5k",
            "10k",
        ):
            assert f" {label} " in f" {scale} ", label


async def test_big_figure_grows_with_the_pane_and_the_chart_gives_way():
    heights = {}
    for size in ((100, 30), (220, 60)):
        async for race in sized_race(size, EIGHT[:4]):
            heights[size] = race.screen.query_one("#pane-uvicorn #qps").region.height
            chart = race.screen.query_one("#chart")
            if size == (100, 30):
                assert not chart.display  # no room: the panes keep their figures
            else:
                assert chart.display
    assert heights[(100, 30)] >= 1
    assert heights[(220, 60)] >= 5 and heights[(220, 60)] > heights[(100, 30)]


async def test_sparklines_share_one_scale_across_panes():
    async for race in sized_race((160, 45), ("gunicorn-sync", "uvicorn")):
        sync = race.screen.query_one("#pane-gunicorn-sync #qps-spark", ScaledSparkline)
        uvi = race.screen.query_one("#pane-uvicorn #qps-spark", ScaledSparkline)
        # one round top for both, at or above the highest point of any pane
        assert sync.top == uvi.top >= max(uvi.data) and uvi.top < 2 * max(uvi.data)
        # the scale is shown with its unit, and 90 req/s is drawn far below 6,700
        assert "req/s" in str(sync.render())
        assert max(sync.data) < uvi.top / 20
        mem_sync = race.screen.query_one("#pane-gunicorn-sync #mem-spark", ScaledSparkline)
        mem_uvi = race.screen.query_one("#pane-uvicorn #mem-spark", ScaledSparkline)
        assert mem_sync.top == mem_uvi.top > 0 and "MiB" in str(mem_sync.render())


def test_bars_run_from_zero_to_the_shared_top():
    assert bars([0, 50, 100], 100, 3) == [" ▄█"]
    assert bars([100], 100, 1, height=2) == ["█", "█"]
    assert bars([50], 100, 1, height=2) == [" ", "█"]
    assert bars([1], 1000, 2) == [" ▁"]  # above zero always shows


def test_block_digits_scale_and_fall_back_to_text():
    assert len(block_lines("90", 1)) == glyph_rows(1) == 3
    assert len(block_lines("90", 3)) == glyph_rows(3) == 8
    assert layout("7,000", "req/s", 80, 10)[1] >= 3
    # too narrow for the full figure and its unit: shortened, then plain text
    text, scale, _ = layout("7,000", "req/s", 21, 3)
    assert (text, scale) == ("7.0k", 1)
    assert layout("7,000", "req/s", 8, 3)[1] == 0


@pytest.mark.parametrize("size", [(100, 30), (200, 55)])
async def test_projector_mode_reads_from_the_back_of_the_room(size):
    """Four stacks: 2×2; each pane's verdict line in bold, first; its name in large type
    where there is room (a bold line at 100×30, in the border too); req/s and p99 at
    one digit size in every pane (the grid's rows differ by a row); p99 in one unit
    everywhere, the unit as large as its digits, labelled "p99"; a gap between the
    figures; failures, waiting, CPU and RSS in bold, never cut; nothing else."""
    async for race in sized_race(size, EIGHT[:4], concurrency=200):
        await race.pilot.press("b")
        await race.advance(4)
        await race.pilot.pause(0.2)
        assert race.screen.has_class("-projector")
        assert not race.screen.query_one("#chart").display
        assert race.screen.query_one("#panes").styles.grid_size_columns == 2
        panes = list(race.screen.panes.values())
        heights = set()
        units = set()
        for pane in panes:
            assert pane.has_class("-projector")
            name = pane.query_one("#name-big", BigNumber)
            big_name = 3 if size[1] >= 55 else 1
            assert visible_in(pane, "#name-big") and name.region.height >= big_name, pane.pane_id
            # the verdict line: the room reads what the figures mean
            assert visible_in(pane, "#breaking"), pane.pane_id
            verdict = race.text(f"#{pane.id} #breaking")
            assert verdict, pane.pane_id
            assert "✓" not in verdict or verdict.startswith("✓ keeping up"), verdict
            assert name.value == pane.label and len(pane.label) <= 8
            for part in ("#qps", "#gap", "#p99big", "#proj"):
                assert visible_in(pane, part), (pane.pane_id, part)
            qps = pane.query_one("#qps", BigNumber)
            p99 = pane.query_one("#p99big", BigNumber)
            assert qps.region.height >= 3 and p99.region.height == qps.region.height
            assert p99.region.y > qps.region.bottom  # a gap between them
            heights.add((qps.region.height, qps.max_scale))
            units.add(p99.value.split()[-1])
            assert p99.unit == "p99"  # the unit is in the large type itself; its label after
            proj = race.text(f"#{pane.id} #proj")
            for word in ("failed", "waiting", "CPU"):
                assert word in proj
            assert all(len(line) <= pane.content_size.width for line in proj.splitlines())
            for part in ("#latency", "#qps-spark", "#mem-spark", "#annotation", "#head"):
                assert not pane.query_one(part).display, part
        assert len(heights) == 1, heights  # one digit size in every pane
        assert len(units) == 1 and units <= {"MS", "S"}, units  # one unit for p99
        # the labels tell the panes apart: gunicorn's two workers by their kind
        assert {p.label for p in panes} >= {"SYNC", "GEVENT"}
        # one sync worker at c=200: its verdict is there, in words
        assert race.text("#pane-gunicorn-sync #breaking").startswith("▲ QUEUEING")
        await race.pilot.press("b")
        await race.advance(2)
        assert not race.screen.has_class("-projector")
        assert race.screen.query_one("#pane-uvicorn #latency").display
        assert not race.screen.query_one("#pane-uvicorn #name-big").display


async def test_a_relayout_redraws_the_figures_on_screen_not_a_newer_interval():
    """The big figures are redrawn every QPS_EVERY intervals; a re-layout in between (a
    mode change, a resize, the shared digit size settling after a refresh) redraws the
    p99 figure at its new size, and must draw the value that was on screen. It drew the
    newest interval's, so the projector snapshot's p99 changed with when the layout
    settled (a flake on a busy machine)."""
    async for race in open_race(plan(concurrency=1000)):
        await race.pilot.press("b")
        await race.advance(4)
        first = next(iter(race.screen.panes.values()))
        while first._seq % QPS_EVERY:  # up to an interval that redraws the figures
            await race.advance(1)
        shown = {
            p.pane_id: p.query_one("#p99big", BigNumber).value for p in race.screen.panes.values()
        }
        await race.advance(1)  # an interval in between: nothing redrawn
        assert {
            p.pane_id: p.query_one("#p99big", BigNumber).value for p in race.screen.panes.values()
        } == shown
        for pane in race.screen.panes.values():
            pane.set_scale_cap(pane.scale_cap - 1)  # a re-layout
        await race.pilot.pause()
        after = {
            p.pane_id: p.query_one("#p99big", BigNumber).value for p in race.screen.panes.values()
        }
        assert after == shown
