"""`PickerScreen`: choose stacks, workload, concurrency and mode, then start the race."""

from __future__ import annotations

from typing import ClassVar

import msgspec
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import (
    Button,
    Footer,
    Input,
    Label,
    RadioButton,
    RadioSet,
    SelectionList,
    Static,
)
from textual.widgets.selection_list import Selection

from stackrace.race.core import StackChoice
from stackrace.race.session import RacePlan
from stackrace.race.urls import UrlTarget
from stackrace.tui.slider import ConcurrencySlider
from stackrace.workloads import WORKLOADS

# every workload of the contract; optional ones (dbjson, served by some stacks only) are
# for `bench` until the picker can refuse the stacks that lack them
PICKED_WORKLOADS = tuple(n for n, w in WORKLOADS.items() if not w.optional)

_WORKLOAD_HELP = {
    "hello": "plain text, no work: raw overhead",
    "json": "a small JSON document: serialisation",
    "io": "waits N ms per request, as a slow backend would",
    "db": "N queries to the managed MariaDB (started for you)",
}


def stack_prompt(choice: StackChoice) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    if choice.available:
        t.append(f"{choice.name:<18}", style="bold")
        t.append(choice.family, style="dim")
    else:
        t.append(f"{choice.name:<18}", style="dim strike")
        t.append(f"{choice.family}  — {choice.reason}", style="dim italic")
    return t


def url_prompt(target: UrlTarget) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f"{target.label():<18}", style="bold")
    t.append(f"external {target.url}", style="dim")
    return t


class PickerScreen(Screen[RacePlan]):
    """Dismisses with the RacePlan to run."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s,f5", "go", "start", priority=True),
        Binding("q", "app.quit", "quit"),
    ]

    def __init__(self, catalog: list[StackChoice], plan: RacePlan) -> None:
        super().__init__(id="picker")
        self.catalog = catalog
        self.plan = plan

    def compose(self) -> ComposeResult:
        yield Static(
            "[b]stackrace[/b]  race web-server stacks side by side, live", id="picker-title"
        )
        with Horizontal(id="picker-body"):
            with Vertical(id="stacks-col"):
                yield Label("Stacks", classes="section")
                yield SelectionList[str](*self._selections(), id="stacks")
            with Vertical(id="options-col"):
                yield Label("Workload", classes="section")
                with RadioSet(id="workload"):
                    for name in PICKED_WORKLOADS:
                        yield RadioButton(
                            f"{name:<6} {_WORKLOAD_HELP[name]}",
                            value=name == self.plan.settings.workload,
                            name=name,
                        )
                with Horizontal(classes="inline"):
                    yield Label("io delay ms", classes="field")
                    yield Input(str(self.plan.settings.io_ms), id="io-delay", type="integer")
                    yield Label("db queries", classes="field")
                    yield Input(str(self.plan.settings.queries), id="db-queries", type="integer")
                yield Label("Mode", classes="section")
                with RadioSet(id="mode"):
                    yield RadioButton(
                        "closed loop: N connections, each waits for its answer",
                        value=self.plan.rate is None,
                        name="closed",
                    )
                    yield RadioButton(
                        "constant rate: N req/s per stack (latency corrected)",
                        value=self.plan.rate is not None,
                        name="rate",
                    )
                yield Label("Concurrency (or req/s)", classes="section")
                yield ConcurrencySlider(self.plan.concurrency, id="start-level")
                yield Button("Start the race  (ctrl+s)", id="go", variant="success")
                yield Static("", id="picker-error")
        yield Footer()

    def _selections(self) -> list[Selection[str]]:
        out = [Selection(url_prompt(u), f"url:{i}", True) for i, u in enumerate(self.plan.urls)]
        chosen = set(self.plan.stacks)
        for c in self.catalog:
            on_ = c.available and (c.id in chosen or (not chosen and c.default))
            out.append(Selection(stack_prompt(c), c.id, on_, id=c.id, disabled=not c.available))
        return out

    def on_mount(self) -> None:
        self.query_one("#stacks", SelectionList).focus()

    @on(Button.Pressed, "#go")
    def action_go(self) -> None:
        chosen = self.query_one("#stacks", SelectionList).selected
        stacks = tuple(v for v in chosen if not v.startswith("url:"))
        urls = tuple(u for i, u in enumerate(self.plan.urls) if f"url:{i}" in chosen)
        if not stacks and not urls:
            self.query_one("#picker-error", Static).update("[red]Pick at least one stack.[/]")
            return
        workload_btn = self.query_one("#workload", RadioSet).pressed_button
        mode_btn = self.query_one("#mode", RadioSet).pressed_button
        settings = msgspec.structs.replace(
            self.plan.settings,
            workload=(workload_btn.name if workload_btn else None) or "hello",
            io_ms=_int(self.query_one("#io-delay", Input).value, self.plan.settings.io_ms),
            queries=_int(self.query_one("#db-queries", Input).value, self.plan.settings.queries),
        )
        level = self.query_one("#start-level", ConcurrencySlider).value
        rate_mode = mode_btn is not None and mode_btn.name == "rate"
        self.dismiss(
            RacePlan(
                stacks=stacks,
                urls=urls,
                settings=settings,
                concurrency=level,
                rate=float(level) if rate_mode else None,
            )
        )


def _int(text: str, default: int) -> int:
    try:
        return max(1, int(text))
    except ValueError:
        return default
