"""Fitting a sentence to a pane's width: shorten the words, never cut the figure.

    fit_words("… its accept queue is not full (1,371 of 4,096): the server took …", 40)

A pane's plain-language line is a sentence whose point is its figures; Rich's ellipsis
cuts at the width, wherever that falls, and a room read "its accept queue is not full
(1,371…" with the limit cut off. The forms, tried in order until the text fits its
rows (wrapped at spaces, as the widget wraps it):

1. the same sentence in shorter words (`SHORTER`: phrases the rules write, each with a
   short form that keeps its meaning);
2. without its clauses that hold no figure, from the last (the words around a figure
   go before the figure does);
3. cut at a clause, then at a word, never inside a figure or a bracket that holds one,
   and said with "…".

A line of figures side by side (`fit_parts`: the waiting clients and the timeout, RSS,
USS and RSS before) keeps each figure whole and leaves out the last that do not fit.

Pure text (Rich text, no widget), so a unit test holds every form; the panes
(stackrace.tui.pane) call it with their width on each redraw.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence

from rich.text import Text

# what the rules write, and a shorter way to say it; longest first where one holds another
SHORTER: tuple[tuple[str, str], ...] = (
    ("the server took them and did not answer in time", "taken, not answered in time"),
    ("they waited in the kernel, never reached the server", "never reached the server"),
    ("its accept queue is not full", "accept queue not full"),
    ("its accept queue is full", "accept queue full"),
    ("its listen backlog is full", "backlog full"),
    ("clients wait in connect", "wait in connect"),
    ("requests/s got no answer within the", "req/s unanswered in the"),
    ("requests queued, each waits", "queued, each waits"),
    ("requests/s", "req/s"),
    (" of CPU per request", " CPU/req"),
    ("req/s served", "req/s"),
    ("the engine, not the server, limits these figures", "engine-limited"),
    ("stuck in connect (it accepts nothing)", "stuck in connect"),
    ("of its processes exited (restarted)", "processes exited"),
)
_SEPARATORS = re.compile(r"(: | · |; | — )")
_DIGIT = re.compile(r"\d")
ELLIPSIS = "…"


def fits(text: str, width: int, rows: int = 1) -> bool:
    """Whether `text` takes at most `rows` lines of `width` once wrapped at spaces."""
    if width <= 0:
        return not text
    if rows <= 1:
        return len(text) <= width
    return len(textwrap.wrap(text, width, break_on_hyphens=False)) <= rows


def fit_words(text: str, width: int, rows: int = 1) -> str:
    """`text` in `rows` lines of `width`: in shorter words, then without its clauses
    that hold no figure, then cut before a figure that does not fit (see the module
    docstring)."""
    if fits(text, width, rows):
        return text
    for long, short in SHORTER:
        if long in text:
            text = text.replace(long, short)
            if fits(text, width, rows):
                return text
    parts = _SEPARATORS.split(text)  # clause, separator, clause, …
    clauses = parts[0::2]
    seps = parts[1::2]
    # clauses without a figure go first, from the end (the first says what it is about)
    for i in range(len(clauses) - 1, 0, -1):
        if not _DIGIT.search(clauses[i]):
            del clauses[i]
            del seps[i - 1]
            text = _join(clauses, seps)
            if fits(text, width, rows):
                return text
    # then whole clauses from the end, said with "…"
    while len(clauses) > 1:
        clauses.pop()
        seps.pop()
        text = _join(clauses, seps) + ELLIPSIS
        if fits(text, width, rows):
            return text
    return _cut(clauses[0], width * max(1, rows) - (rows - 1) * 4)


def _join(clauses: list[str], seps: list[str]) -> str:
    out = clauses[0]
    for sep, clause in zip(seps, clauses[1:], strict=True):
        out += sep + clause
    return out


def _cut(text: str, room: int) -> str:
    """The words of `text` that fit `room` with "…", never ending in a figure's
    bracket or a figure cut short."""
    words = text.split(" ")
    kept: list[str] = []
    for word in words:
        if len(" ".join([*kept, word])) + len(ELLIPSIS) > room:
            break
        kept.append(word)
    # a bracket left open held a figure that did not fit: drop it whole
    while kept and " ".join(kept).count("(") > " ".join(kept).count(")"):
        kept.pop()
    out = " ".join(kept).rstrip(" ,:;·—")
    return out + ELLIPSIS if out else text[: max(0, room - 1)] + ELLIPSIS


def fit_parts(parts: Sequence[Text | tuple[Text, ...]], width: int, sep: str = " · ") -> Text:
    """Figures side by side (`parts`: "waiting 200", "2.2 s old", "timeout 10s") in
    `width` columns: the first always, each next one only whole, in the first of its
    forms that fits (a tuple: longest first, "timeout 91 (+3)" then "timeout 91") — a
    part that does not fit is left out with those after it, said by "…", never cut to
    "timeout …" (0: any width)."""
    out = Text(no_wrap=True, overflow="ellipsis")
    for i, part in enumerate(parts):
        forms = part if isinstance(part, tuple) else (part,)
        room = width - out.cell_len - (len(sep) if i else 0)
        form = next((f for f in forms if not width or not i or f.cell_len <= room), None)
        if form is None:
            if out.cell_len + 2 <= width:
                out.append(" " + ELLIPSIS, style="dim")  # more was left out
            break
        if i:
            out.append(sep, style="dim")
        out.append_text(form)
    return out
