"""`ThenNowStrip`: a classic experiment's figures and claims beside the live panes.

Shown when the race was started from a preset that replays one of the classic
experiments (`stackrace --preset seed-002-concurrency-ceilings`): the original's req/s
and rank beside today's, and each claim with its verdict on the race so far (✓ holds,
✗ does not hold, · cannot be tested yet, and why), judged by the report's own rules
(race/live/thennow.py). `n` shows or hides it.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from stackrace.race.live.thennow import ThenNow
from stackrace.report import claims

_MARK = {claims.HOLDS: ("✓", "bold green"), claims.FAILS: ("✗", "bold red")}
_UNTESTED = ("·", "dim")


def strip_text(tn: ThenNow, short: dict[str, str] | None = None) -> Text:
    """The strip's text: the original's figures beside now's, then every claim."""
    short = short or {}
    t = Text()
    t.append(tn.title + "\n", style="bold")
    if tn.figures:
        t.append("req/s then (rank) → now (rank)\n", style="dim")
        for row in tn.figures:
            fig = row.figure
            name = short.get(fig.stack, fig.stack)
            where = f" c={row.level}" if row.level is not None else ""
            now = f"{row.now:,.0f} #{row.now_rank}" if row.now is not None else "not yet"
            t.append(f"{name}{where}", style="bold")
            t.append(f"  {fig.then:,.0f} #{row.then_rank} → {now}\n")
    t.append(f"\nclaims: {tn.tally()}\n", style="bold")
    for v in tn.verdicts:
        mark, style = _MARK.get(v.status, _UNTESTED)
        t.append(f"{mark} ", style=style)
        t.append(v.claim.text, style="" if v.status != claims.UNTESTABLE else "dim")
        then = v.then
        if v.status != claims.UNTESTABLE:
            figures = f"then {then}, now {v.now}" if then != "-" else f"now {v.now}"
            t.append(f"  {figures}", style=style)
        else:
            t.append(f"  ({v.reason})", style="dim italic")
        t.append("\n")
    return t


class ThenNowStrip(Static):
    """The strip; the race screen hands it a fresh `ThenNow` every two seconds."""

    def show(self, tn: ThenNow | None) -> None:
        self.display = tn is not None
        if tn is not None:
            self.update(strip_text(tn))
