"""Names made for machines out of names made by people.

A stack's name is user text: `gunicorn-sync:workers=4`, `nginx-proxy:backend=uvicorn`,
or whatever a variant, a preset, a stacks file or a run file says — `x/../../victim`
included. Such text is a label, never a path component, a widget id or a file name as
it stands. `slug()` keeps what is safe everywhere (ASCII letters, digits, `-`, `_`),
folds every other run of characters into one `_`, cuts the result short, and adds a
hash of the whole text, so that two names that fold alike (`a:b=1` and `a_b=1`) still
get two slugs and nothing typed can reach outside the directory it is named in.

    slug("gunicorn-sync:workers=4") -> "gunicorn-sync_workers_4-3f9a0c1e"
    slug("x/../../victim")          -> "x_victim-…"

The hash is on by default because the slug must be unique for the text; `hashed=False`
is for text already checked to be a plain name (a stack block's name).
"""

from __future__ import annotations

import hashlib
import re

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


def slug(text: str, max_len: int = 40, hashed: bool = True) -> str:
    """A name of letters, digits, '-' and '_' only, starting with a letter or digit
    (a Textual id must not start with a digit: callers that need that add a prefix)."""
    folded = _UNSAFE.sub("_", text).strip("_-")[:max_len].rstrip("_-") or "x"
    if not hashed:
        return folded
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{folded}-{digest}"


def is_safe(name: str) -> bool:
    """True when `name` may be used as one path component as it is."""
    return bool(SAFE.match(name)) and len(name) <= 255
