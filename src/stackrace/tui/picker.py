"""`PickerScreen`: choose stacks, workload, concurrency and mode, then start the race.

The stacks are chosen in its list (stackrace.tui.stack_list: rows, variants, every
setting of a stack); the workload (or your own requests), the mode and the starting
level here. It dismisses with the `RacePlan` to run.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec
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
    Static,
)

from stackrace.base.printable import textual_markup as escape
from stackrace.race.core.members import StackChoice
from stackrace.race.core.plan import RacePlan
from stackrace.race.core.urls import target_url
from stackrace.settings.race_settings import RaceSettings
from stackrace.settings.scenario import ScenarioError, describe
from stackrace.settings.workloads import WORKLOADS
from stackrace.tui.slider import LevelSlider
from stackrace.tui.stack_list import StackList, build_rows

# every workload of the contract; optional ones (dbjson, served by some stacks only) are
# for `bench` until the picker can refuse the stacks that lack them
PICKED_WORKLOADS = tuple(n for n, w in WORKLOADS.items() if not w.optional)
_WORKLOAD_HELP = {
    "hello": "plain text, no work: raw overhead",
    "json": "a small JSON document: serialisation",
    "io": "waits N ms per request, as a slow backend would",
    "db": "N queries to the managed MariaDB (started for you)",
}


def _own_requests(settings: RaceSettings) -> str:
    """`GET / ×3, /slow ×1`: what --path / --scenario load, in one line."""

    try:
        kinds = settings.request_kinds() or []
    except ScenarioError as exc:  # checked before the app opened; kept for safety
        return str(exc)
    if not kinds:
        return ""
    method = "" if len(kinds) > 1 or kinds[0].method != "GET" else "GET "
    return f"{method}{describe(kinds)}  (your --path / --scenario, on every stack)"


class PickerScreen(Screen[RacePlan]):
    """Dismisses with the RacePlan to run."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s,f5", "go", "start", priority=True),
        Binding("q", "app.quit", "quit"),
    ]

    def __init__(self, catalog: list[StackChoice], plan: RacePlan, synthetic: bool = False) -> None:
        super().__init__(id="picker")
        self.catalog = catalog
        self.plan = plan
        self.synthetic = synthetic

    def compose(self) -> ComposeResult:
        title = "[b]stackrace[/b]  race web-server stacks side by side, live"
        if self.synthetic:
            title += (
                "   [b reverse] SYNTHETIC DEMO [/] these stacks are models: nothing is "
                "started or loaded, and nothing here says what is installed"
            )
        yield Static(title, id="picker-title")
        with Horizontal(id="picker-body"):
            with Vertical(id="stacks-col"):
                yield Label("Stacks", classes="section", id="stacks-count")
                yield Static(
                    "[dim]Space[/] toggles  [dim]w[/] workers  [dim]t[/] threads  "
                    "[dim]p[/] every setting  [dim]v[/] adds a variant  [dim]ctrl+s[/] starts",
                    id="stacks-hint",
                )
                yield StackList(build_rows(self.catalog, self.plan), self.synthetic, id="stacks")
            with Vertical(id="options-col"):
                if self.plan.settings.own_requests:
                    # --path / --scenario: your requests are the load, not a workload
                    # of stackrace's apps (which your app does not serve)
                    yield Label("Requests", classes="section")
                    yield Static(escape(_own_requests(self.plan.settings)), id="own-requests")
                else:
                    yield Label("Workload", classes="section")
                    with RadioSet(id="workload"):
                        for name in PICKED_WORKLOADS:
                            yield RadioButton(
                                f"{name:<6} {_WORKLOAD_HELP[name]}",
                                value=name == self.plan.settings.workload,
                                name=name,
                            )
                    with Horizontal(classes="inline"):
                        s = self.plan.settings
                        yield Label("io delay ms", classes="field")
                        yield Input(str(s.io_ms), id="io-delay", type="integer")
                        yield Label("db queries", classes="field")
                        yield Input(str(s.queries), id="db-queries", type="integer")
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
                yield LevelSlider(self.plan.concurrency, id="start-level")
                yield Button("Start the race  (ctrl+s)", id="go", variant="success")
                yield Static("", id="picker-error")
        yield Footer()

    def on_mount(self) -> None:
        self._show_loads()
        self.query_one("#stacks", StackList).focus()

    @on(StackList.Changed)
    def _count(self, event: StackList.Changed) -> None:
        rows = event.stack_list.rows
        n = len(event.stack_list.selected)
        avail = sum(r.available for r in rows)
        self.query_one("#stacks-count", Label).update(
            f"Stacks: {n} of {avail} chosen" + ("  (synthetic)" if self.synthetic else "")
        )

    @on(RadioSet.Changed, "#workload")
    @on(Input.Changed)
    def _show_loads(self) -> None:
        """Each URL target's line says the URL that will be loaded for this workload."""
        if not self.plan.urls:
            return
        settings = self._settings()
        stacks = self.query_one("#stacks", StackList)
        stacks.loads = {
            i: target_url(u.url, settings.workload, settings.io_ms, settings.queries)
            for i, u in enumerate(self.plan.urls)
        }
        stacks.refill()

    def _settings(self) -> RaceSettings:
        if self.plan.settings.own_requests:
            return self.plan.settings  # your requests: no workload to choose
        workload_btn = self.query_one("#workload", RadioSet).pressed_button
        return msgspec.structs.replace(
            self.plan.settings,
            workload=(workload_btn.name if workload_btn else None) or "hello",
            io_ms=_int(self.query_one("#io-delay", Input).value, self.plan.settings.io_ms),
            queries=_int(self.query_one("#db-queries", Input).value, self.plan.settings.queries),
        )

    @on(Button.Pressed, "#go")
    def action_go(self) -> None:
        chosen = self.query_one("#stacks", StackList).selected
        stacks = tuple(v for v in chosen if not v.startswith("url:"))
        urls = tuple(u for i, u in enumerate(self.plan.urls) if f"url:{i}" in chosen)
        if not stacks and not urls:
            self.query_one("#picker-error", Static).update("[red]Pick at least one stack.[/]")
            return
        mode_btn = self.query_one("#mode", RadioSet).pressed_button
        settings = self._settings()
        level = self.query_one("#start-level", LevelSlider).value
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
