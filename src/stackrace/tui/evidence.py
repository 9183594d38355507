"""`w`: the focused stack's evidence — top frames of its app, thread states, the accept
queue, each process — at any level, captured on demand when there is none yet.

The lines are the session's (race/live/why_view.py `evidence_text`, the same words as
bench's and the report's); this screen only shows them, and asks for them again once
a second while a window is being captured, so the evidence appears when it is ready
without the user pressing anything. Every line is plain `Text` (no markup is parsed):
a function name or a file path from the app cannot style or break the screen. `e`
exports the window's flame graph (stackrace.evidence.flame, names escaped for SVG) into
the screenshot directory, as `bench --flame` does for a run.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Label, Static

from stackrace.base.atomicfile import write_atomic
from stackrace.tui.dialogs import dialog_keys

REFRESH_S = 1.0


class EvidenceScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = dialog_keys("w", "export flame graph (.svg)")

    def __init__(
        self,
        title: str,
        lines: Callable[[], list[str]],
        flame: Callable[[], tuple[str, str] | None] = lambda: None,
    ) -> None:
        super().__init__(classes="dialog")
        self.title_text = title
        self.lines = lines
        self.flame = flame
        self.exported: Path | None = None

    def action_export(self) -> None:
        """`e`: the window's flame graph into the screenshot directory."""
        got = self.flame()
        if got is None:
            self.notify("no flame graph: no window with samples yet", severity="warning")
            return
        name, svg = got
        path = Path(getattr(self.app, "screenshot_dir", ".")) / name
        try:
            write_atomic(path, svg)
        except OSError as exc:  # a full disk, a read-only directory: say which file, and why
            self.notify(f"flame graph not saved: {path}: {exc.strerror or exc}", severity="error")
            return
        self.exported = path
        self.notify(f"saved {path}")

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box", id="evidence-box"):
            yield Label(Text(f"Why: {self.title_text}"), classes="dialog-title")
            with VerticalScroll():
                yield Static("", id="evidence")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_lines()
        self.set_interval(REFRESH_S, self.refresh_lines)

    def refresh_lines(self) -> None:
        if not self.query("#evidence"):
            return
        self.query_one("#evidence", Static).update(Text("\n".join(self.lines())))

    @property
    def text(self) -> str:
        """What the screen shows (tests read it)."""
        return "\n".join(self.lines())
