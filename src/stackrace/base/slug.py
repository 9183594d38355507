"""Safe names for things made from user text: widget ids, file and directory names.

A stack's name is user text: a variant (`gunicorn-sync:workers=2`), a param's value
(`nginx-proxy:backend=gunicorn-sync:workers=4`), whatever a preset, a stacks file or a
run file says (`x/../../victim` included), a ghost's label, a URL. Used as a Textual id
it crashed the app on the first variant (`BadIdentifier`); used as a directory name, a
value with `/` or `..` pointed outside the run directory and got deleted. Labels keep
the user's text; ids and names come from `slug`, made for the purpose:

- only `a-z`, `0-9`, `-` and `_`, starting with a letter: a valid Textual id, CSS
  selector and file name everywhere, never `.`, `..` or a path;
- a name that is already such a slug is its own slug (`gunicorn-sync`, `url1`), so ids
  and run directories stay readable and stable;
- any other name gets a short hash of the whole text after its readable part, so two
  names that differ only in the characters replaced (`a:b=1`, `a,b-1`) never share
  a slug;
- at most `MAX_LEN` characters (a file name, a socket path's directory).

    slug("gunicorn-sync")           -> "gunicorn-sync"
    slug("gunicorn-sync:workers=4") -> "gunicorn-sync-workers-4-3f9a0c1e"
    slug("x/../../victim")          -> "x-victim-…"
"""

from __future__ import annotations

import hashlib
import re

MAX_LEN = 48
_SAFE_SLUG = re.compile(r"^[a-z][a-z0-9_-]*$")
_UNSAFE = re.compile(r"[^a-z0-9_-]+")
SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


def slug(text: str, prefix: str = "s") -> str:
    """A safe, unique-per-text name for `text` (see the module's docstring); `prefix`
    starts a slug whose text does not start with a letter."""
    if _SAFE_SLUG.match(text) and len(text) <= MAX_LEN:
        return text
    readable = _UNSAFE.sub("-", text.lower()).strip("-_")
    if not readable or not readable[0].isalpha():
        readable = f"{prefix}-{readable}".rstrip("-")
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{readable[: MAX_LEN - 9].rstrip('-_')}-{digest}"


def short(text: str, max_len: int) -> str:
    """A readable prefix of `text` in safe characters only, no hash: for a name that
    is made unique by other means (a temporary directory's random suffix)."""
    return _UNSAFE.sub("_", text.lower()).strip("_-")[:max_len].rstrip("_-") or "x"


def is_safe(name: str) -> bool:
    """True when `name` may be used as one path component as it is."""
    return bool(SAFE.match(name)) and len(name) <= 255
