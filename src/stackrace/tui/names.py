"""Short names for large type: what a room reads from the back row.

A pane's title ("gunicorn (gevent worker) (workers=2)") is for reading close up; in
projector mode the stack's name is drawn in block letters, four columns a letter, so it
must be short and must still tell the panes apart. `short_labels` works from the stack
references of the panes on screen: the first word of the name is dropped when another
pane shares it (gunicorn-sync and gunicorn-gevent read SYNC and GEVENT), and a
variant's settings are kept, shortened (workers=2 → W2, threads=8 → T8, any other
setting by its value: opcache=off → OFF).
"""

from __future__ import annotations

_SHORT_KEYS = {"workers": "W", "threads": "T"}


def _parts(ref: str) -> tuple[list[str], str]:
    base, _, opts = ref.partition(":")
    extra = []
    for opt in filter(None, opts.split(",")):
        key, _, value = opt.partition("=")
        if key in _SHORT_KEYS and value.isdigit():
            extra.append(f"{_SHORT_KEYS[key]}{value}")
        else:
            extra.append(value.partition(":")[0].split("-")[-1] or key)
    return base.split("-"), " ".join(extra)


def short_labels(refs: list[str]) -> dict[str, str]:
    """A short upper-case label for each stack reference (or member id)."""
    parts = {ref: _parts(ref) for ref in refs}
    firsts = [words[0] for words, _ in parts.values()]
    out = {}
    for ref, (words, extra) in parts.items():
        if len(words) > 1 and firsts.count(words[0]) > 1:
            words = words[1:]
        label = "-".join(words) + (f" {extra}" if extra else "")
        out[ref] = label.upper()
    return out
