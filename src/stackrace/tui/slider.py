"""`LevelSlider`: a log-scale slider over fixed steps (1, 2, 5, 10, … 10000).

Textual has no slider and the third-party one is GPL, so this is our own: a reactive
`value` snapped to the nearest step, arrow keys and +/- to move one step, Home/End, a
mouse click or drag to jump, and a `Changed` message whenever the value changes;
`set_read_only` makes it show a level it does not take (a replay's: its keys leave
the footer).

What it sets is the level, by that name all the way down: `Session.set_level` →
`RaceCore.set_level`, which alone decides its unit (connections per stack in closed
loop, req/s per stack at a constant rate); only the engine, which runs both, has a
concurrency and a rate apart. (It was `ConcurrencySlider`, and set a rate in rate mode.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from stackrace.rules.level_log import LEVELS

_HANDLE = "◆"
_TRACK = "━"
_DONE = "━"


def nearest_step(steps: Sequence[int], value: float) -> int:
    """The step closest to value on a log scale, clamped to the ends."""
    if value <= steps[0]:
        return steps[0]
    if value >= steps[-1]:
        return steps[-1]
    # compare ratios, not differences: 7 is nearer 5 than 10 on this scale? 7/5 < 10/7
    return min(steps, key=lambda s: max(s, value) / min(s, value))


class LevelSlider(Widget, can_focus=True):
    """Pick a level among `steps`; posts `LevelSlider.Changed`."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # + and − are the keys that drive a whole demo: the footer names them first
        # (a focused widget's bindings come before the screen's, so a hidden + here
        # would hide the screen's too)
        Binding("plus,equals_sign", "step(1)", "more load", key_display="+"),
        Binding("minus", "step(-1)", "less", key_display="−"),
        Binding("right,up", "step(1)", "more", show=False),
        Binding("left,down", "step(-1)", "less", show=False),
        Binding("home", "jump(0)", show=False),
        Binding("end", "jump(-1)", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {"slider--bar", "slider--handle", "slider--scale"}

    DEFAULT_CSS = """
    LevelSlider {
        height: 2;
        width: 1fr;
        min-width: 30;
        & > .slider--bar { color: $foreground; text-style: bold; }
        & > .slider--handle { color: $foreground; text-style: bold; }
        & > .slider--scale { color: $foreground-muted; }
        &:focus > .slider--bar { color: $accent; }
        &:focus > .slider--handle { color: $accent; text-style: bold reverse; }
    }
    """

    value: reactive[int] = reactive(10)

    @dataclass
    class Changed(Message):
        slider: LevelSlider
        value: int

        @property
        def control(self) -> LevelSlider:
            return self.slider

    def __init__(
        self,
        value: int = 10,
        steps: Sequence[int] = LEVELS,
        unit: str = "connections",
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        # a level given off the steps (`-c 300`, a preset's 64) is one of them: the slider
        # says the level the race runs, not the step nearest it; +/- go on from there
        given = int(value)
        fits = steps[0] <= given <= steps[-1]
        self.steps = tuple(sorted({*steps, given})) if fits else tuple(steps)
        self.unit = unit
        self._dragging = False
        # a replay's slider shows the recorded level and takes no hand: its keys leave
        # the footer (a replay's shows the replay's keys, never "+ more load")
        self.read_only = False
        self.set_reactive(LevelSlider.value, nearest_step(self.steps, value))

    # --- the value ------------------------------------------------------------------

    def validate_value(self, value: int) -> int:
        return nearest_step(self.steps, value)

    def watch_value(self, old: int, new: int) -> None:
        if old != new:
            self.post_message(self.Changed(self, new))

    def set_quietly(self, value: int) -> None:
        """Show a value set elsewhere (a ramp) without posting `Changed`."""
        self.set_reactive(LevelSlider.value, nearest_step(self.steps, value))
        self.refresh()

    @property
    def index(self) -> int:
        return self.steps.index(self.value)

    def set_read_only(self, on: bool = True) -> None:
        """Show the level without taking keys or the mouse (a replay's)."""
        self.read_only = on
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (self.read_only and action in ("step", "jump"))

    def action_step(self, delta: int) -> None:
        i = max(0, min(len(self.steps) - 1, self.index + delta))
        self.value = self.steps[i]

    def action_jump(self, index: int) -> None:
        self.value = self.steps[index]

    # --- geometry: where each step sits on the track ---------------------------------

    def _track(self) -> tuple[int, int]:
        """(first column, usable width) of the track inside the widget."""
        label = len(self._label())
        width = max(len(self.steps), self.size.width - label - 2)
        return label + 1, width

    def _column_of(self, index: int) -> int:
        start, width = self._track()
        return start + round(index * (width - 1) / (len(self.steps) - 1))

    def _index_at(self, x: int) -> int:
        start, width = self._track()
        frac = (x - start) / max(1, width - 1)
        return max(0, min(len(self.steps) - 1, round(frac * (len(self.steps) - 1))))

    def _label(self) -> str:
        return f"{self.value:>6,} "

    # --- mouse ----------------------------------------------------------------------

    def on_mouse_down(self, event: events.MouseDown) -> None:
        if self.read_only:
            return
        self._dragging = True
        self.capture_mouse()
        self.value = self.steps[self._index_at(event.x)]
        event.stop()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        if self._dragging:
            self.value = self.steps[self._index_at(event.x)]

    def on_mouse_up(self, event: events.MouseUp) -> None:
        if self._dragging:
            self._dragging = False
            self.release_mouse()

    # --- drawing --------------------------------------------------------------------

    def render(self) -> Text:
        width = self.size.width
        start, track_width = self._track()
        here = self._column_of(self.index)
        focused = self.has_focus
        line = Text(no_wrap=True, overflow="crop")
        line.append(self._label(), style="bold" if focused else "")
        line.append(" " * (start - len(line)))
        bar = self.get_component_rich_style("slider--bar")
        scale_style = self.get_component_rich_style("slider--scale")
        line.append(_DONE * (here - start), style=bar)
        line.append(_HANDLE, style=self.get_component_rich_style("slider--handle"))
        line.append(_TRACK * (start + track_width - here - 1), style=scale_style)
        ticks = [" "] * width
        for i, step in enumerate(self.steps):
            col = self._column_of(i)
            text = _short(step)
            pos = min(max(col - len(text) // 2, start), width - len(text))
            if all(c == " " for c in ticks[max(0, pos - 1) : pos + len(text) + 1]):
                ticks[pos : pos + len(text)] = text
        scale = Text("".join(ticks)[:width], style=scale_style, no_wrap=True)
        return Text("\n", no_wrap=True).join([line, scale])


def _short(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)
