"""`PickerScreen`: choose stacks, workload, concurrency and mode, then start the race."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import msgspec
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.widgets import (
    Button,
    Footer,
    Input,
    Label,
    OptionList,
    RadioButton,
    RadioSet,
    Select,
    Static,
)
from textual.widgets.option_list import Option

from stackrace.race.core.members import StackChoice
from stackrace.race.core.plan import RacePlan
from stackrace.race.core.urls import UrlTarget, target_url
from stackrace.settings.race_settings import RaceSettings
from stackrace.settings.workloads import WORKLOADS
from stackrace.stacks.tunables import Tunable
from stackrace.tui.dialogs import SCREENSHOT
from stackrace.tui.slider import ConcurrencySlider

# every workload of the contract; optional ones (dbjson, served by some stacks only) are
# for `bench` until the picker can refuse the stacks that lack them
PICKED_WORKLOADS = tuple(n for n, w in WORKLOADS.items() if not w.optional)

_WORKLOAD_HELP = {
    "hello": "plain text, no work: raw overhead",
    "json": "a small JSON document: serialisation",
    "io": "waits N ms per request, as a slow backend would",
    "db": "N queries to the managed MariaDB (started for you)",
}


# what `w` and `t` step through (a value off these steps joins them where it falls)
WORKER_STEPS = (1, 2, 4, 8)
THREAD_STEPS = (1, 2, 4, 8, 16, 32)
NAME_W = 24  # the title column at least: wider when the list has room for whole titles
FAMILY_W = 10
TUNING_MIN = 9  # "1 worker"; wider when a row's settings need it ("2 workers · 8 threads")


@dataclass
class Row:
    """One line of the stack list: a stack (or a variant of it) or a URL target.

    `overrides` are the variant's settings in the order given (`workers`, `threads`,
    a param): the row's id is the stack reference the launcher resolves, so a preset's
    `php-fpm-nginx:opcache=off` stays exactly that name (its claims name it)."""

    choice: StackChoice | None
    selected: bool
    overrides: dict[str, str] = field(default_factory=dict)
    url: UrlTarget | None = None
    index: int = 0  # the URL's index on the command line

    @property
    def id(self) -> str:
        if self.url is not None:
            return f"url:{self.index}"
        assert self.choice is not None
        if not self.overrides:
            return self.choice.id
        return f"{self.choice.id}:" + ",".join(f"{k}={v}" for k, v in self.overrides.items())

    @property
    def available(self) -> bool:
        return self.url is not None or (self.choice is not None and self.choice.available)

    def tunable(self, key: str) -> Tunable | None:
        if self.choice is None:
            return None
        return next((t for t in self.choice.tunables if t.key == key), None)

    def value(self, key: str) -> str:
        t = self.tunable(key)
        return self.overrides.get(key, t.default if t is not None else "")

    def set(self, key: str, value: str) -> None:
        """Give `key` a value; its default removes the override (the plain stack)."""
        t = self.tunable(key)
        if t is not None and value == t.default:
            self.overrides.pop(key, None)
        else:
            self.overrides[key] = value

    @property
    def workers(self) -> int:
        v = self.value("workers")
        return int(v) if v.isdigit() else 1

    def tuning(self) -> str:
        """ "2 workers · 8 threads · opcache=off": what this row runs with."""
        if self.choice is None:
            return ""
        parts = []
        for t in self.choice.tunables:
            v = self.value(t.key)
            if t.numeric:
                unit = t.key if v != "1" else t.key.rstrip("s")
                parts.append(f"{v} {unit}")
            elif t.key in self.overrides:
                parts.append(f"{t.key}={v}")
        return " · ".join(parts)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def row_prompt(
    row: Row,
    loads: str = "",
    synthetic: bool = False,
    name_w: int = NAME_W,
    tuning_w: int = TUNING_MIN,
) -> Text:
    """`[✓] name  family  tuning  note`: the mark is a character, not only a colour."""
    t = Text(no_wrap=True, overflow="ellipsis")
    mark = "[✓] " if row.selected else "[ ] "
    if not row.available:
        mark = " ✗  "
    t.append(mark, style="bold green" if row.selected else "dim")
    if row.url is not None:
        t.append(f"{_cut(row.url.label(), name_w):<{name_w}} ", style="bold")
        t.append(f"{'external':<{FAMILY_W}} ", style="dim")
        t.append(f"loads {loads or row.url.url}", style="")
        return t
    c = row.choice
    assert c is not None
    name_style = "bold" if c.available else "dim"
    t.append(f"{_cut(c.name, name_w):<{name_w}} ", style=name_style)
    t.append(f"{_cut(c.family, FAMILY_W):<{FAMILY_W}} ", style="dim")
    t.append(f"{row.tuning():<{tuning_w}} ", style="bold" if row.overrides else "")
    if not c.available:
        t.append(f"not available: {c.reason}", style="italic")
    elif synthetic:
        t.append("synthetic model", style="italic yellow")
    return t


def tuning_width(rows: list[Row]) -> int:
    return max([TUNING_MIN, *(len(r.tuning()) for r in rows)])


def name_width(rows: list[Row], width: int) -> int:
    """The title column: whole titles when the list is wide enough, never under NAME_W."""
    longest = max(
        (len(r.choice.name if r.choice else r.url.label() if r.url else "") for r in rows),
        default=NAME_W,
    )
    room = width - 4 - FAMILY_W - tuning_width(rows) - 5  # the mark, the gaps, the scrollbar
    return max(NAME_W, min(longest, room))


def _next(steps: tuple[int, ...], value: str) -> str:
    n = int(value) if value.isdigit() else steps[0]
    ladder = sorted({*steps, n})
    return str(ladder[(ladder.index(n) + 1) % len(ladder)])


class StackList(OptionList):
    """The stacks to race: Space (or Enter, or a click) toggles, w cycles the workers,
    t the threads, p opens every setting of the stack, v adds a variant."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "toggle_row", "toggle", show=True),
        Binding("w", "step('workers')", "workers", show=True),
        Binding("t", "step('threads')", "threads", show=True),
        Binding("p", "tune", "settings", show=True),
        Binding("v", "variant", "add variant", show=True),
    ]

    @dataclass
    class Changed(Message):
        stack_list: StackList

    def __init__(self, rows: list[Row], synthetic: bool = False, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]  # Textual's own (id, classes)
        self.rows = rows
        self.synthetic = synthetic
        self.loads: dict[int, str] = {}
        self.name_w = NAME_W

    def on_mount(self) -> None:
        self.refill()
        first = next((i for i, r in enumerate(self.rows) if r.available), None)
        self.highlighted = first

    def on_resize(self) -> None:
        if name_width(self.rows, self.size.width) != self.name_w:
            self.refill()

    def refill(self) -> None:
        keep = self.highlighted
        self.name_w = name_width(self.rows, self.size.width)
        tuning_w = tuning_width(self.rows)
        self.set_options(
            Option(
                row_prompt(r, self.loads.get(r.index, ""), self.synthetic, self.name_w, tuning_w),
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

    def action_toggle_row(self) -> None:
        row = self._current()
        if row is not None and row.available:
            row.selected = not row.selected
            self.refill()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.action_toggle_row()

    def action_step(self, key: str) -> None:
        """`w`/`t`: the next worker (thread) count of the highlighted stack; the row
        becomes the variant (`gunicorn-sync:workers=2`) and is chosen."""
        row = self._current()
        if row is None or row.choice is None or not row.available:
            return
        if row.tunable(key) is None:
            self.notify(f"{row.choice.name} has no {key} setting", severity="warning")
            return
        row.set(key, _next(WORKER_STEPS if key == "workers" else THREAD_STEPS, row.value(key)))
        row.selected = True
        self._unique(row)
        self.refill()

    def _unique(self, row: Row) -> None:
        """Two rows may not race under one name: step a copy's workers until it differs."""
        while any(r is not row and r.id == row.id for r in self.rows):
            if row.tunable("workers") is None:
                return
            row.set("workers", str(row.workers * 2))

    def action_tune(self) -> None:
        """`p`: every setting of the highlighted stack, in a dialog."""
        row = self._current()
        if row is None or row.choice is None or not row.available:
            return
        if not row.choice.tunables:
            self.notify(f"{row.choice.name} has no settings to change", severity="warning")
            return

        def apply(values: dict[str, str] | None) -> None:
            if values is None:
                return
            for key, value in values.items():
                row.set(key, value)
            row.selected = True
            if any(r is not row and r.id == row.id for r in self.rows):
                self.notify(f"{row.id} is already in the list", severity="warning")
            self.refill()

        self.app.push_screen(TuneScreen(row), apply)

    def action_variant(self) -> None:
        """A second line for the same stack: twice the workers where it has workers,
        else its settings dialog opens for the copy (1 and 2 side by side)."""
        row = self._current()
        if row is None or row.choice is None or not row.available:
            return
        new = Row(row.choice, True, dict(row.overrides))
        i = self.rows.index(row) + 1
        self.rows.insert(i, new)
        if new.tunable("workers") is not None:
            self._unique(new)
            self.refill()
            self.highlighted = i
            return
        self.refill()
        self.highlighted = i
        if new.choice is not None and new.choice.tunables:
            self.action_tune()

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


class TuneScreen(ModalScreen[dict[str, str] | None]):
    """Every setting a variant may change for one stack (stacks.tunables): workers and
    threads as whole numbers, a param with `choices` from its list, any other param as
    text. Dismisses with the values, or None (escape)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss(None)", "cancel"),
        Binding("ctrl+s", "apply", "apply", priority=True),
        SCREENSHOT,  # (an input field that has the focus gets the letter first)
    ]

    def __init__(self, row: Row) -> None:
        super().__init__(classes="dialog")
        self.row = row

    def compose(self) -> ComposeResult:
        c = self.row.choice
        assert c is not None
        with Vertical(classes="dialog-box", id="tune-box"):
            yield Label(f"Settings of {c.name} ({c.id})", classes="dialog-title")
            for t in c.tunables:
                with Horizontal(classes="tune-row"):
                    hint = f"default {t.default}"
                    yield Label(f"{t.key}", classes="tune-key")
                    if t.choices:
                        yield Select(
                            [(v, v) for v in t.choices],
                            value=self.row.value(t.key),
                            allow_blank=False,
                            id=f"tune-{t.key}",
                        )
                    else:
                        yield Input(
                            self.row.value(t.key),
                            id=f"tune-{t.key}",
                            type="integer" if t.numeric else "text",
                        )
                    yield Label(hint, classes="tune-hint")
            yield Static("", id="tune-error")
            yield Button("Apply  (ctrl+s)", id="tune-apply", variant="success")
        yield Footer()

    def values(self) -> tuple[dict[str, str], str]:
        """The dialog's values, and "" or the first problem with them."""
        c = self.row.choice
        assert c is not None
        out: dict[str, str] = {}
        for t in c.tunables:
            widget = self.query_one(f"#tune-{t.key}")
            value = str(widget.value if isinstance(widget, Select | Input) else "").strip()
            if not value or "," in value:
                # a comma would split the variant `NAME:k=v,k=v` into another setting
                return out, f"{t.key}: a value, without a comma"
            problem = t.problem(value)  # the launcher's own rule (stacks.tunables.check_kind)
            if problem:
                return out, f"{t.key}: {problem}"
            out[t.key] = value
        return out, ""

    @on(Button.Pressed, "#tune-apply")
    def action_apply(self) -> None:
        values, problem = self.values()
        if problem:
            self.query_one("#tune-error", Static).update(f"[red]{problem}[/]")
            return
        self.dismiss(values)


def _own_requests(settings: RaceSettings) -> str:
    """`GET / ×3, /slow ×1`: what --path / --scenario load, in one line."""
    from stackrace.settings.scenario import ScenarioError, describe

    try:
        kinds = settings.request_kinds() or []
    except ScenarioError as exc:  # checked before the app opened; kept for safety
        return str(exc)
    if not kinds:
        return ""
    method = "" if len(kinds) > 1 or kinds[0].method != "GET" else "GET "
    return f"{method}{describe(kinds)}  (your --path / --scenario, on every stack)"


def build_rows(catalog: list[StackChoice], plan: RacePlan) -> list[Row]:
    """The list's rows: URL targets, then the catalog; variants in the plan get rows."""
    rows = [Row(None, True, url=u, index=i) for i, u in enumerate(plan.urls)]
    chosen = list(plan.stacks)
    by_id = {c.id: c for c in catalog}
    wanted: dict[str, list[dict[str, str]]] = {}
    for ref in chosen:
        base, _, opts = ref.partition(":")
        if base not in by_id:
            continue
        overrides = {}
        for opt in filter(None, opts.split(",")):
            key, _, value = opt.partition("=")
            overrides[key] = value
        wanted.setdefault(base, []).append(overrides)
    for c in catalog:
        picks = wanted.get(c.id)
        if picks:
            rows += [Row(c, c.available, o) for o in picks]
        else:
            rows.append(Row(c, c.available and not chosen and c.default))
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
