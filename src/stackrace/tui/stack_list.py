"""`StackList`: the picker's list of stacks to race, one row per stack or variant (and
per URL target), and `TuneScreen`, the dialog with every setting of one stack.

A row's id is the stack reference the launcher resolves (`php-fpm-nginx:opcache=off`),
so a preset's variant stays exactly that name (its claims name it). Space toggles a row,
`w` and `t` step its workers and threads, `p` opens every setting, `v` adds a second row
for the same stack; two rows never race under one name. A value typed in the dialog is
held to the launcher's own rule (stackrace.stacks.tunables.check_kind) before it is
taken. The screen around the list is stackrace.tui.picker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Input, Label, OptionList, Select, Static
from textual.widgets.option_list import Option

from stackrace.race.core.members import StackChoice
from stackrace.race.core.plan import RacePlan
from stackrace.race.core.urls import UrlTarget
from stackrace.stacks.tunables import Tunable
from stackrace.tui.dialogs import SCREENSHOT

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
