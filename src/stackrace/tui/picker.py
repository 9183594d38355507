"""`PickerScreen`: choose stacks, workload, concurrency and mode, then start the race."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import msgspec
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import (
    Button,
    Footer,
    Input,
    Label,
    OptionList,
    RadioButton,
    RadioSet,
    Static,
)
from textual.widgets.option_list import Option

from stackrace.race.core import StackChoice
from stackrace.race.session import RacePlan
from stackrace.race.urls import UrlTarget, target_url
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


WORKER_STEPS = (1, 2, 4, 8)
NAME_W = 24  # the title column: longer titles are cut with an ellipsis, never run on
FAMILY_W = 10


@dataclass
class Row:
    """One line of the stack list: a stack (or a variant of it) or a URL target."""

    choice: StackChoice | None
    selected: bool
    workers: int = 1
    url: UrlTarget | None = None
    index: int = 0  # the URL's index on the command line

    @property
    def id(self) -> str:
        if self.url is not None:
            return f"url:{self.index}"
        assert self.choice is not None
        if self.workers != self.choice.workers:
            return f"{self.choice.id}:workers={self.workers}"
        return self.choice.id

    @property
    def available(self) -> bool:
        return self.url is not None or (self.choice is not None and self.choice.available)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def row_prompt(row: Row, loads: str = "", synthetic: bool = False) -> Text:
    """`[✓] name  family  workers  note`: the mark is a character, not only a colour."""
    t = Text(no_wrap=True, overflow="ellipsis")
    mark = "[✓] " if row.selected else "[ ] "
    if not row.available:
        mark = " ✗  "
    t.append(mark, style="bold green" if row.selected else "dim")
    if row.url is not None:
        t.append(f"{_cut(row.url.label(), NAME_W):<{NAME_W}} ", style="bold")
        t.append(f"{'external':<{FAMILY_W}} ", style="dim")
        t.append(f"loads {loads or row.url.url}", style="")
        return t
    c = row.choice
    assert c is not None
    name_style = "bold" if c.available else "dim"
    t.append(f"{_cut(c.name, NAME_W):<{NAME_W}} ", style=name_style)
    t.append(f"{_cut(c.family, FAMILY_W):<{FAMILY_W}} ", style="dim")
    workers = f"{row.workers} worker" + ("s" if row.workers != 1 else "")
    t.append(f"{workers:<10} ", style="bold" if row.workers != c.workers else "")
    if not c.available:
        t.append(f"not available: {c.reason}", style="italic")
    elif synthetic:
        t.append("synthetic model", style="italic yellow")
    return t


class StackList(OptionList):
    """The stacks to race: Space (or Enter, or a click) toggles, w cycles the workers,
    v adds a variant of the highlighted stack."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "toggle", "toggle", show=True),
        Binding("w", "workers", "workers", show=True),
        Binding("v", "variant", "add variant", show=True),
    ]

    @dataclass
    class Changed(Message):
        stack_list: StackList

    def __init__(self, rows: list[Row], synthetic: bool = False, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.rows = rows
        self.synthetic = synthetic
        self.loads: dict[int, str] = {}

    def on_mount(self) -> None:
        self.refill()
        first = next((i for i, r in enumerate(self.rows) if r.available), None)
        self.highlighted = first

    def refill(self) -> None:
        keep = self.highlighted
        self.set_options(
            Option(
                row_prompt(r, self.loads.get(r.index, ""), self.synthetic),
                id=f"row{i}",
                disabled=not r.available,
            )
            for i, r in enumerate(self.rows)
        )
        if keep is not None and keep < len(self.rows):
            self.highlighted = keep
        self.post_message(self.Changed(self))

    @property
    def selected(self) -> list[str]:
        return [r.id for r in self.rows if r.selected and r.available]

    def _current(self) -> Row | None:
        i = self.highlighted
        return self.rows[i] if i is not None and 0 <= i < len(self.rows) else None

    def action_toggle(self) -> None:
        row = self._current()
        if row is not None and row.available:
            row.selected = not row.selected
            self.refill()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.action_toggle()

    def action_workers(self) -> None:
        row = self._current()
        if row is None or row.choice is None or not row.available:
            return
        steps = WORKER_STEPS if row.workers in WORKER_STEPS else (row.workers, *WORKER_STEPS)
        row.workers = steps[(steps.index(row.workers) + 1) % len(steps)]
        row.selected = True
        self.refill()

    def action_variant(self) -> None:
        """A second line for the same stack with twice the workers: 1 and 2 side by side."""
        row = self._current()
        if row is None or row.choice is None or not row.available:
            return
        taken = {r.id for r in self.rows}
        new = Row(row.choice, True, row.workers)
        while new.id in taken:
            new.workers *= 2
        i = self.rows.index(row) + 1
        self.rows.insert(i, new)
        self.refill()
        self.highlighted = i

    # selection helpers (tests, remembered choices)
    def select(self, row_id: str, on: bool = True) -> None:
        for r in self.rows:
            if r.id == row_id and r.available:
                r.selected = on
        self.refill()

    def deselect_all(self) -> None:
        for r in self.rows:
            r.selected = False
        self.refill()


def build_rows(catalog: list[StackChoice], plan: RacePlan) -> list[Row]:
    """The list's rows: URL targets, then the catalog; variants in the plan get rows."""
    rows = [Row(None, True, url=u, index=i) for i, u in enumerate(plan.urls)]
    chosen = list(plan.stacks)
    by_id = {c.id: c for c in catalog}
    wanted: dict[str, list[int]] = {}
    for ref in chosen:
        base, _, opts = ref.partition(":")
        if base not in by_id:
            continue
        workers = by_id[base].workers
        for opt in opts.split(","):
            key, _, value = opt.partition("=")
            if key == "workers" and value.isdigit():
                workers = int(value)
        wanted.setdefault(base, []).append(workers)
    for c in catalog:
        picks = wanted.get(c.id)
        if picks:
            rows += [Row(c, c.available, w) for w in picks]
        else:
            rows.append(Row(c, c.available and not chosen and c.default, c.workers))
    return rows


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
                    "[dim]Space[/] toggles  [dim]w[/] workers  [dim]v[/] adds a variant  "
                    "[dim]ctrl+s[/] starts",
                    id="stacks-hint",
                )
                yield StackList(build_rows(self.catalog, self.plan), self.synthetic, id="stacks")
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

    def _settings(self):  # type: ignore[no-untyped-def]
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
