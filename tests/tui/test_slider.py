"""LevelSlider: snapping, clamping, keys, mouse click and drag, Changed messages."""

from __future__ import annotations

from textual.app import App, ComposeResult

from stackrace.tui.slider import LevelSlider, nearest_step


class SliderApp(App[None]):
    def __init__(self, value: int = 10) -> None:
        super().__init__()
        self.value = value
        self.changes: list[int] = []

    def compose(self) -> ComposeResult:
        yield LevelSlider(self.value, id="s")

    def on_level_slider_changed(self, event: LevelSlider.Changed) -> None:
        self.changes.append(event.value)


def test_nearest_step_is_log_scale_and_clamped():
    steps = (1, 2, 5, 10)
    assert nearest_step(steps, 0) == 1
    assert nearest_step(steps, 99) == 10
    assert nearest_step(steps, 3) == 2  # 3/2 < 5/3
    assert nearest_step(steps, 7) == 5  # 7/5 < 10/7


async def test_keys_step_through_levels_and_clamp():
    app = SliderApp(10)
    async with app.run_test(size=(80, 4)) as pilot:
        slider = app.query_one(LevelSlider)
        slider.focus()
        await pilot.press("right", "plus", "left")
        await pilot.pause()
        assert slider.value == 20
        assert app.changes == [20, 50, 20]
        await pilot.press("end", "right")
        await pilot.pause()
        assert slider.value == 10000
        await pilot.press("home", "minus", "minus")
        await pilot.pause()
        assert slider.value == 1
        slider.value = 333  # assigned values snap to a step
        assert slider.value == 500


async def test_mouse_click_and_drag():
    app = SliderApp(1)
    async with app.run_test(size=(80, 4)) as pilot:
        slider = app.query_one(LevelSlider)
        last = slider._column_of(len(slider.steps) - 1)
        await pilot.click(LevelSlider, offset=(last, 0))
        await pilot.pause()
        assert slider.value == 10000
        # drag from the right end back to the middle step (100)
        mid = slider._column_of(slider.steps.index(100))
        await pilot.mouse_down(LevelSlider, offset=(last, 0))
        await pilot.hover(LevelSlider, offset=(mid, 0))
        await pilot.mouse_up(LevelSlider, offset=(mid, 0))
        await pilot.pause()
        assert slider.value == 100
        assert app.changes[0] == 10000 and app.changes[-1] == 100


async def test_set_quietly_posts_nothing():
    app = SliderApp(10)
    async with app.run_test(size=(80, 4)) as pilot:
        slider = app.query_one(LevelSlider)
        slider.set_quietly(200)
        await pilot.pause()
        assert slider.value == 200 and app.changes == []


def test_a_level_off_the_steps_is_the_slider_s_own() -> None:
    """`stackrace -c 300 --go`: the race runs 300 connections; the slider once said 200
    (the nearest step) beside panes saying c=300. The given level is a step of its own,
    and +/- go on from it to the steps around it."""
    from stackrace.tui.slider import LevelSlider

    slider = LevelSlider(300)
    assert slider.value == 300
    i = slider.steps.index(300)
    assert slider.steps[i - 1] == 200 and slider.steps[i + 1] == 500
    assert LevelSlider(100).steps == LevelSlider(50).steps  # on the steps: as ever
