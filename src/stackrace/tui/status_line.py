"""What the race screen's top bar says, as markup from the session's view: the engine's
health (its CPU, or that it is saturated and the figures may be its limit) and the
status line (how the race ended, a replay or a caption, the database's trouble, cores
shared, the connection mode, the timeout, a ramp or a capacity search under way, stacks
still starting, the last error). The race's verdict on shared cores is said here, once,
for every pane. Pure functions: stackrace.tui.race puts the text in its widgets.
"""

from __future__ import annotations

from stackrace.base.printable import textual_markup as escape
from stackrace.race.core.state import StackState
from stackrace.race.live.view import SessionView


def engine_health(view: SessionView) -> str:
    """The engine's box: its CPU of a core, or SATURATED (its figures may be its own
    limit), or that a synthetic race sends no load."""
    if view.synthetic:
        return "[b reverse] SYNTHETIC [/]\nno load is sent"
    if view.saturated:
        return f"⚠ ENGINE SATURATED {view.engine_cpu:.0f} %\n[b]figures may be its limit"
    return f"engine CPU\n[b]{view.engine_cpu:.0f} %[/b] of a core"


def status_line(view: SessionView) -> str:
    """The line under the controls, most important first."""
    status = []
    if view.ended:
        status.append(f"[b red]{view.ended.upper()}[/]")
    if view.replay:
        status.append(f"[b reverse] {view.replay} [/]")
    if view.caption:
        status.append(f"[b]{view.caption}[/]")
    if view.database:
        status.append(f"[b red]{view.database.upper()}: figures are the database's[/]")
    if view.shared is not None and view.shared.full:
        # the race's verdict: every pane's figure is a share of a full core
        status.append(f"[b reverse magenta] {view.shared.headline()} [/]")
    elif view.shared_cores:
        # the fair figures then are each pane's CPU µs per request and its wait for a core
        status.append(f"[yellow]{view.placement}[/]")
    if not view.keepalive:
        status.append("a new connection per request")
    if view.load_split:  # h1 and h2 carry the same requests in flight, split so
        status.append(f"[b]{escape(view.load_split)}[/]")
    status.append(f"[dim]timeout {view.timeout:g}s[/]")
    if view.ramp:
        status.append(f"[b reverse] {view.ramp} [/]")
    if view.capacity:
        status.append(f"[b reverse] {escape(view.capacity)} [/]")
    starting = sum(p.state == StackState.STARTING for p in view.panes)
    if starting:
        status.append(f"{starting} starting…")
    if view.errors:
        status.append(f"[red]{view.errors[-1]}[/]")
    return "  ".join(status)
