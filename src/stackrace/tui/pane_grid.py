"""`PaneGrid`: the race's panes side by side, made to compare.

One pane per stack (and a recording's ghost beside its live twin), each in its colour,
and everything a reader compares across them shared: one digit size (the largest every
pane's box allows, so a pane a row shorter does not draw smaller figures), one scale for
the sparklines (heights compare across panes), one unit for p99 in projector mode ("2.5
S" never beside "157 MS"), and names shortened alike for large type (tui/names.py). The
race screen (stackrace.tui.race) sizes the grid and hands it each tick's view.

The app may close at any await (a web page closed during start-up, a race or big mode:
`stackrace web` ends the app with the page): after each mount the grid checks that the
app still runs (`closing`), and queries nothing of a pane that may be gone.
"""

from __future__ import annotations

from typing import Any

from textual.containers import Grid

from stackrace.race.live.view import SessionView
from stackrace.tui.format import PALETTE
from stackrace.tui.ghost import GhostPane
from stackrace.tui.names import short_labels
from stackrace.tui.pane import StackPane
from stackrace.tui.pane_text import shown_window
from stackrace.tui.spark import nice_top


class PaneGrid(Grid):
    """The panes of a race (`panes`, `ghost_panes`, each one's colour in `pane_colors`)."""

    def __init__(self, projector: bool = False, **kw: Any) -> None:
        super().__init__(**kw)
        self.projector = projector
        self.panes: dict[str, StackPane] = {}
        self.ghost_panes: dict[str, GhostPane] = {}
        self.pane_colors: dict[str, str] = {}
        self._tops = (0.0, 0.0)

    @property
    def closing(self) -> bool:
        """The app is shutting down (or this grid left it): its panes may have lost
        their parts already (a page closed in `stackrace web` ends the app at once,
        while a tick is between two awaits; Textual stops running the app, then
        removes every widget)."""
        return not self.app.is_running or not self.is_attached

    async def sync(self, view: SessionView) -> bool:
        """A pane for every member and ghost of `view` that has none yet; whether any
        was added (the screen then lays the grid out again)."""
        new = [pv for pv in view.panes if pv.id not in self.panes]
        ghosts = [gv for gv in view.ghosts if gv.id not in self.ghost_panes]
        if not new and not ghosts:
            return False
        for pv in new:
            color = PALETTE[len(self.pane_colors) % len(PALETTE)]
            # the colour is the pane's before it is mounted: a query after the mount
            # found no '#name-big' when the page closed meanwhile (the app crashed)
            pane = StackPane(pv, color=color)
            pane.projector = self.projector
            pane.set_class(self.projector, "-projector")
            self.pane_colors[pv.id] = color
            pane.styles.border_title_color = color
            self.panes[pv.id] = pane
            pane.external = pv.external
            # live panes in order, each before the ghosts of other stacks
            first_ghost = next(iter(self.ghost_panes.values()), None)
            await self.mount(pane, before=first_ghost)
            if self.closing:
                return False  # the app closed during the mount: nothing more to lay out
        for gv in ghosts:
            # a ghost sits beside its live twin (the same stack), else after them all
            ghost = GhostPane(gv)
            twin = self.panes.get(gv.stack_id)
            after = next(
                (g for g in reversed(self.ghost_panes.values()) if g.stack_id == gv.stack_id),
                twin,
            )
            self.ghost_panes[gv.id] = ghost
            await self.mount(ghost, after=after) if after is not None else await self.mount(ghost)
            if self.closing:
                return False
        self._label_panes()
        return True

    def show(self, view: SessionView, new_interval: bool) -> None:
        """Draw every pane and ghost from `view`; on a new interval of the engine, the
        sparklines' shared scale follows."""
        rate_mode = view.rate is not None
        if self.projector:
            self._share_p99_unit(view)
        for pv in view.panes:
            self.panes[pv.id].show(pv, new_interval, rate_mode, view.timeout, view.seq)
        for gv in view.ghosts:
            self.ghost_panes[gv.id].show(gv, rate_mode)
        if new_interval:
            self._share_scales()

    def set_projector(self, on: bool) -> None:
        self.projector = on
        for pane in self.panes.values():
            pane.set_projector(on)

    def _share_p99_unit(self, view: SessionView) -> None:
        """Projector mode: p99 in one unit in every pane at any moment (seconds as soon
        as one pane's p99 reaches a second), so "2.5 S" never sits beside "157 MS"."""
        windows = [w for pv in view.panes if (w := shown_window(pv)) is not None]
        top = max((w.latency.p99 for w in windows), default=0)
        unit = "S" if top >= 1_000_000 else "MS"
        for pane in self.panes.values():
            pane.set_p99_unit(unit)

    def share_scale(self) -> None:
        """One digit size in every pane: the largest scale every pane's box allows (a
        pane a row shorter than its neighbours would otherwise draw smaller digits)."""
        if not self.panes or self.closing:
            return  # (called after a refresh: the app may have closed meanwhile)
        sizes = [p.content_size for p in self.panes.values() if p.content_size.height > 0]
        box = (min(s.width for s in sizes), min(s.height for s in sizes)) if sizes else None
        for pane in self.panes.values():
            pane.scale_cap = 8
            pane.shared_box = box
            pane.fit()
        cap = min(p.fig_scale for p in self.panes.values()) or 1
        for pane in self.panes.values():
            pane.set_scale_cap(cap)

    def on_stack_pane_resized(self, event: StackPane.Resized) -> None:
        event.stop()
        self.screen.call_after_refresh(self.share_scale)

    def _label_panes(self) -> None:
        """Short, distinct names for large type (tui/names.py)."""

        ids = [pid for pid, p in self.panes.items() if not p.external]
        labels = short_labels(ids)
        for pid, pane in self.panes.items():
            label = labels.get(pid) or pane.name_text.upper()[:12]
            pane.set_label(label)

    def _share_scales(self) -> None:
        """One scale for every pane's sparklines: heights compare across panes."""
        rps = nice_top(
            max((max(p.rps_history, default=0.0) for p in self.panes.values()), default=0.0)
        )
        rss = nice_top(
            max((max(p.rss_history, default=0.0) for p in self.panes.values()), default=0.0)
        )
        if (rps, rss) != self._tops:
            self._tops = (rps, rss)
            for pane in self.panes.values():
                pane.set_tops(rps, rss)
