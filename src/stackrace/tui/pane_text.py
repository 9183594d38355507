"""What a pane's lines say: its figures, verdict, latency table, SLO line and title as
Rich text, from the window and the judgment the pane is handed (pure functions: no
widget, no state).

One pane, one story: every figure is read from the window the level's judgment was
made on (`shown_window`), and the verdict line never cuts the figure that proves it
(`verdict_line`: the longest form that fits). Lines that change colour interval by
interval carry it inline: a CSS class change would restyle (and repaint) the whole
pane every time. The widget that draws them is stackrace.tui.pane.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from rich.text import Text

from stackrace.engine.model import FAILURE_KINDS, LatencySummary, WindowStats
from stackrace.race.core.state import StackState
from stackrace.race.live.view import PaneView
from stackrace.rules.level import (
    AT_FULL_CPU,
    CORE_LIMITED,
    ENGINE_LIMITED,
    KEEPING_UP,
    MEASURING,
    SLO_MISSED,
    WARMING,
    Judgment,
)
from stackrace.tui.fit import fit_parts, fit_words
from stackrace.tui.format import FAILURE_LABELS, fmt_clock, fmt_lat, fmt_level, fmt_mb

_PERCENTILES = ("p50", "p90", "p99", "p99.9", "max")


# Lines that change colour interval by interval carry it inline: a CSS class change
# would restyle (and repaint) the whole pane every time
_RISING = "bold #ffffff on #b71c1c"


_QUEUED = "#ffb74d"


# which columns survive in a narrow pane, most important first (p99 always)
_KEEP_ORDER = ("p99", "p50", "max", "p90", "p99.9")


def latency_lines(lat: LatencySummary, unc: LatencySummary | None, width: int = 36) -> Text:
    """A percentile table in `width` columns; fixed columns so figures do not jump.

    In rate mode a second row holds the uncorrected (send-to-response) figures. A pane
    too narrow for all five columns keeps p99, then p50, then max.
    """
    label = 4 if unc is not None else 0
    ncols = max(2, min(5, (width - label) // 7))
    keep = set(_KEEP_ORDER[:ncols])
    names = [n for n in _PERCENTILES if n in keep]
    col = max(6, min(9, (width - label) // len(names)))
    head = Text(" " * label + "".join(f"{n:>{col}}" for n in names), style="dim")
    rows = [head, _latency_row("co" if unc else "", lat, col, names, label, bold=True)]
    if unc is not None:
        rows.append(_latency_row("raw", unc, col, names, label, bold=False))
    return Text("\n", no_wrap=True, overflow="crop").join(rows)


def _latency_row(
    label: str, lat: LatencySummary, col: int, names: list[str], label_w: int, bold: bool
) -> Text:
    t = Text(f"{label:<{label_w}}", style="dim")
    if lat.count == 0:
        t.append("".join(f"{'–':>{col}}" for _ in names), style="dim")
        return t
    values = dict(zip(_PERCENTILES, (lat.p50, lat.p90, lat.p99, lat.p999, lat.max), strict=True))
    for name in names:
        t.append(f"{fmt_lat(values[name]):>{col}}", style="bold" if bold and name == "p99" else "")
    return t


# each state's mark and, for a narrow pane, its short name
_MARK = {
    KEEPING_UP: "✓",
    MEASURING: "…",
    WARMING: "…",
    ENGINE_LIMITED: "◆",
    CORE_LIMITED: "◆",
    AT_FULL_CPU: "◆",
}


_SHORT = {
    AT_FULL_CPU: "FULL CPU",
    ENGINE_LIMITED: "ENGINE-LIMITED",
    CORE_LIMITED: "CORE-LIMITED",
    SLO_MISSED: "SLO MISSED",
    WARMING: "warming",
}


_HEAD_STYLE = {KEEPING_UP: "bold green", MEASURING: "dim", WARMING: "bold"}


def short_verdict(j: Judgment, rate_mode: bool) -> str:
    """The judgment in a pane's border, where the pane has no row for its verdict line
    ("▲ SATURATED at c=200")."""
    mark = _MARK.get(j.state, "▲")
    return f"{mark} {_SHORT.get(j.state, j.label)} at {fmt_level(j.level, rate_mode)}"


def state_class(state: str) -> str:
    """The pane's CSS class for a judgment's state ("-queueing", "-keeping-up"); a
    JIT's "warming" is not the stack's state of starting up (`-warming`)."""
    return "-" + ("warming-up" if state == WARMING else state.replace(" ", "-"))


def verdict_row(view: PaneView, rate_mode: bool, width: int, rows: int = 1) -> Text:
    """The verdict's row: the level's judgment while the stack is live, else that a
    rate-mode stack fell behind ("▼ BEHIND SCHEDULE …"), else nothing."""
    live = view.state in (StackState.READY, StackState.WARMING)
    if view.judgment is not None and view.target is not None and live:
        return verdict_line(view, rate_mode, width, rows)
    line = Text(no_wrap=True, overflow="ellipsis")
    if view.behind:
        line.append(f"▼ {view.behind.upper()[:16]}", style="bold")
        line.append(view.behind[16:])
    return line


def annotation_text(view: PaneView, width: int, rows: int) -> str:
    """The plain-language row: why it broke (its evidence's cause) before any other
    sentence, the knee predicted while nothing else needs saying (race/live/
    why_view.py); in shorter words rather than cut at a figure (tui/fit.py)."""
    if view.cause:
        # "why: KIND: proof → knob": the kind is the point, and a clause without a figure
        # to fit_words (it dropped "blocking wait"): kept whole, the proof fitted after it
        why, _, rest = view.cause.partition(": ")
        kind, sep, proof = rest.partition(": ")
        head = f"{why}: {kind}: "
        room = width * rows - len(head) - rows  # a wrapped line may end a word short
        if sep and room > 10:
            return head + fit_words(proof, room, 1)
        return fit_words(view.cause, width, rows)
    return fit_words(view.annotation or view.knee_text, width, rows)


def verdict_line(view: PaneView, rate_mode: bool, width: int, rows: int = 1) -> Text:
    """The judgment and the figures that prove it, never cut before the figure: the
    longest form that fits `rows` lines of `width` — with since when, then without it,
    then the state, the level and the proof's first figure ("▲ SATURATED c=200 · CPU 98%
    of 1 core") — and only the last form cut at its end."""
    j = view.judgment
    assert j is not None
    level = fmt_level(j.level, rate_mode)
    held = j.state not in (KEEPING_UP, MEASURING, WARMING)
    since = (
        f" since {fmt_clock(view.verdict_since)}" if held and view.verdict_since is not None else ""
    )
    proof = j.why or j.label
    first = proof.split(" · ")[0].split("; ")[0]  # "500 wait ~5.7 s each"
    figure = first.split(" (")[0]  # "9.3% failed (timed out)" → "9.3% failed"
    mark = _MARK.get(j.state, "▲")
    name, short = j.label, _SHORT.get(j.state, j.label)
    forms = [
        (f"{mark} {name} at {level}{since}", proof),
        (f"{mark} {name} at {level}", proof),
        (f"{mark} {name} at {level}{since}", first),
        (f"{mark} {short} {level}", proof),
        (f"{mark} {short} {level}", first),
        (f"{mark} {short} {level}", figure),
        (f"{mark} {short}", first),
        (f"{mark} {short}", figure),
    ]
    # wrapping breaks at spaces: a few columns of each line may go unused
    room = width * rows - (3 * (rows - 1) if rows > 1 else 0)
    head, tail = next(((h, t) for h, t in forms if len(h) + 3 + len(t) <= room), forms[-1])
    line = Text(no_wrap=rows <= 1, overflow="ellipsis")
    line.append(head, style=_HEAD_STYLE.get(j.state, "bold"))
    if tail:
        line.append(f" · {tail}", style="dim" if j.state == MEASURING else "")
    b = view.breaking
    if b is not None and not j.broken and b.level != j.level:
        line.append(f" · broke first at {fmt_level(b.level, rate_mode)} ({b.kind})", style="dim")
    return line


def shown_window(view: PaneView) -> WindowStats | None:
    """The window every figure of the pane is read from: the level's running totals,
    the window its judgment was made on (the last interval while the level is younger
    than a second: a level just set has no totals yet)."""
    t = view.target
    if t is None:
        return None
    return t.total if t.total.seconds >= 1.0 else t.interval


def three_figures(value: float) -> int:
    """Round to three significant figures: what a room can read, and steadier to redraw."""
    n = round(value)
    if n < 1000:
        return n
    scale = 10 ** (len(str(n)) - 3)
    return round(n / scale) * scale


def title_for(name: str, member_id: str, room: int) -> str:
    """The longest of a pane's names that fits `room` columns: its name, its id, or its
    id cut in the middle so that a variant's settings (the end) stay readable."""
    if room <= 0 or len(name) <= room:
        return name
    if len(member_id) <= room:
        return member_id
    if room < 8:
        return member_id[:room]
    head = max(4, room // 3)  # the start names the server; the end holds the settings
    return member_id[:head] + "…" + member_id[-(room - 1 - head) :]


_SLO_STYLE = {True: "bold green", False: "bold white on #b71c1c", None: "dim"}


def slo_line(text: str, meets: bool | None) -> Text:
    """The SLO line: green while the level meets it, red when it misses, dim while the
    level has too few answers to say."""
    return Text(text, style=_SLO_STYLE[meets], no_wrap=True, overflow="ellipsis")


def two_lines(first: Text, second: Text) -> Text:
    """Two lines that never wrap (a wrapped first line would push the second out)."""
    return Text("\n", no_wrap=True, overflow="ellipsis").join([first, second])


def p99_in(lat: LatencySummary, unit: str) -> str:
    """p99 in a given unit, with the unit, for large type: "157 MS", "2.5 S"."""
    if lat.count == 0:
        return f"– {unit}"
    value = lat.p99 / (1e6 if unit == "S" else 1e3)
    digits = f"{value:.2f}" if value < 1 else f"{value:.1f}" if value < 10 else f"{value:.0f}"
    return f"{digits} {unit}"


def p99_figure(lat: LatencySummary) -> tuple[str, str]:
    """p99 for a big figure: digits and a unit ("124", "ms p99")."""
    if lat.count == 0:
        return "–", "ms p99"
    us = lat.p99
    if us >= 1_000_000:
        return f"{us / 1e6:.1f}", "s p99"
    ms = us / 1000
    return (f"{ms:.1f}" if ms < 10 else f"{ms:.0f}"), "ms p99"


def path_of(url: str) -> str:

    if not url:
        return ""
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def memory_line(view: PaneView, projector: bool, width: int = 0) -> Text:
    """RSS (and USS, and RSS before the load, unless in projector mode), each whole in
    `width` (the last left out rather than cut), or why there is no figure: a server
    started by hand without --pid is not sampled."""
    res = view.resources
    parts = []
    if res is not None:
        parts.append(Text("RSS ", style="dim").append(f"{fmt_mb(res.rss)}", style="bold"))
        if not projector:
            parts.append(Text("USS ", style="dim").append(fmt_mb(res.uss)))
    elif view.external:  # a server started by hand, without --pid: nothing to sample
        parts.append(Text("RSS not sampled", style="dim"))
    else:
        parts.append(Text("RSS –", style="dim"))
    if view.baseline is not None and not projector:
        parts.append(Text("before ", style="dim").append(fmt_mb(view.baseline.rss)))
    return fit_parts(parts, width, sep="  ")


def cpu_line(view: PaneView, projector: bool, width: int = 0) -> Text:
    """CPU (and µs per request, unless in projector mode), and the share of the time it
    wanted a core that it got one, when it waited 5 % of a core or more: in shorter
    words when the line is wider than `width` (0: any width), never with its last
    figure cut."""
    for got_words in ("got a core {}% of the time it wanted one", "got a core {}%", "core {}%"):
        line = _cpu_line(view, projector, got_words)
        if not width or line.cell_len <= width:
            break
    return line


def _cpu_line(view: PaneView, projector: bool, got_words: str) -> Text:
    res = view.resources
    cpu = Text(no_wrap=True, overflow="ellipsis")
    cpu.append("CPU ", style="dim")
    if res is None and view.external:
        cpu.append("not sampled (give --pid)", style="dim")
    else:
        cpu.append(f"{res.cpu_percent:.0f} %" if res is not None else "–", style="bold")
    if view.cpu_us_per_request is not None and not projector:
        cpu.append(f"  {view.cpu_us_per_request:,.0f} µs/req", style="")
    if res is not None and res.cpu_wait_percent >= 5:
        # of the time it wanted a core, the share it got one: never above 100 % (four
        # processes waiting on one core sum to "waited 300 %", no share of anything)
        wanted = res.cpu_percent + res.cpu_wait_percent
        got = 100.0 * res.cpu_percent / wanted if wanted > 0 else 100.0
        cpu.append("  " + got_words.format(f"{got:.0f}"), style="bold yellow")
    return cpu


def head_line(family: str, level: str, protocol: str, path: str, width: int) -> str | Text:
    """A pane's head: "async  c=100 · 100 open · h1  GET /hello" (`protocol` beside h2
    panes: race/core/streams.py's pane_words), or an h2 pane's, its protocol first:
    "h2c 4×25 · 100 streams · 0 GOAWAY · 0 RST · async · GET /hello", each figure whole
    (tui/fit.py), the family and the path as the width allows. `c=1 · 1 open` would
    count connections where the level counts streams, and a quarter pane cut the
    GOAWAYs off behind them; narrower, "100 open", then the streams left to the waiting
    line (a stream waiting is a client waiting) and the RSTs to the failures line."""
    if not (level and protocol.startswith("h2")):
        level += f" · {protocol}" if level and protocol else ""
        return f"{family}  {level}" + (f"  {path}" if path else "")
    said = protocol.split(" · ")
    if len(" · ".join(said[:3])) > width:
        said = [p.replace(" streams", " open") for p in said]
    if len(" · ".join(said[:3])) > width and len(said) > 2:
        said = [said[0], *said[2:]]
    parts = [Text(p) for p in said] + [Text(family, style="dim")]
    return fit_parts([*parts, Text(path)] if path else parts, width)


def failures_line(
    w: WindowStats, new: dict[str, int], judgment: Judgment | None = None, width: int = 0
) -> tuple[Text, bool]:
    """The window's failures by kind and what is new since the last redraw (`new`), each
    kind whole in `width` (tui/fit.py), and whether any rose (then the line is in alarm
    colours); "none" is green only when the judgment is."""
    rising = False
    parts: list[Text | tuple[Text, ...]] = [Text("failed", style="dim")]
    for kind in FAILURE_KINDS:
        total = w.failures.get(kind, 0)
        if not total:
            continue
        now = min(new.get(kind, 0), total)
        label = FAILURE_LABELS[kind]
        if kind == "http_status":
            codes = ",".join(str(c) for c in sorted(w.status) if c >= 400)
            label = f"HTTP {codes}" if codes else label
        elif kind == "stream_reset":
            # the server's error codes, as HTTP's statuses are said (engine/h2.py counts
            # each reset's "RST_STREAM <CODE>" in `errors`)
            codes = ",".join(sorted(e[11:] for e in w.errors if e.startswith("RST_STREAM ")))
            label = f"RST_STREAM {codes}" if codes else label
        if now:
            rising = True
            # what is new goes before the total does, in a narrow pane
            parts.append(
                (Text(f"{label} {total:,} (+{now:,})", style="bold"), Text(f"{label} {total:,}"))
            )
        else:
            parts.append(Text(f"{label} {total:,}"))
    if not any(w.failures.values()):
        # nothing failed *yet*: with clients waiting past the bound that is not
        # health, and the timeout says how long they may wait before they fail
        green = judgment is not None and judgment.green
        said = "none" if green or not w.waiting else "none yet"
        parts.append(Text(said, style="green" if green else ""))
    line = fit_parts(parts, width, sep=" ")
    if rising:
        line.stylize(_RISING)
    return line, rising


def waiting_line(w: WindowStats, timeout: float, width: int = 0) -> Text:
    """The clients still waiting, the oldest wait, those still connecting, and the
    timeout that bounds them, each whole in `width` (tui/fit.py: the timeout goes
    before it is cut to "timeout …"); in warning colours while some wait longer than
    the window."""
    parts = []
    if w.waiting:
        parts.append(Text("waiting ", style="dim").append(f"{w.waiting:,}", style="bold"))
        if w.oldest_wait_us:
            old = Text(fmt_lat(w.oldest_wait_us), style="bold" if w.stale else "")
            parts.append(old.append(" old", style="dim"))
        if w.connecting:
            # the server's accept queue is full: these never got a byte out
            parts.append(Text(f"{w.connecting:,} connecting", style="bold"))
    else:
        parts.append(Text("waiting 0", style="dim"))
    parts.append(Text(f"timeout {timeout:g}s", style="dim"))
    wait = fit_parts(parts, width)
    if w.stale:
        wait.stylize(_QUEUED)
    return wait


def projector_lines(p: dict[str, str], rows: int, width: int) -> Text:
    """Projector mode's bold lines: failures and waiting, then CPU and memory (`p`: the
    figures as text); on one line when the pane has one, in the form that fits its
    width, so that a figure is dropped whole (memory first) rather than cut."""
    first = f"failed {p['failed']}  waiting {p['waiting']}"
    cpu, rss = f"CPU {p['cpu']}", f"  RSS {p['rss']}"
    why = f"  why: {p['why']}" if p.get("why") else ""  # the cause a room reads
    # memory goes first, then the cause, never the CPU figure
    seconds = [cpu + rss + why, cpu + why, cpu + rss, cpu]
    if rows > 1:
        second = next((f for f in seconds if len(f) <= width), seconds[-1])
        text = f"{first}\n{second}"
    else:
        forms = [f"{first}  {f}" for f in seconds[1:2] + seconds[3:]] + [first]
        text = next((f for f in forms if len(f) <= width), forms[-1])
    return Text(text, style="bold", no_wrap=True, overflow="ellipsis")
