"""Safe names for things made from user text: widget ids, file and directory names.

A stack's name is user text: a variant (`gunicorn-sync:workers=2`), a param's value
(`nginx-proxy:backend=gunicorn-sync:workers=4`), a ghost's label, a URL. Used as a
Textual id it crashed the app on the first variant (`BadIdentifier`); used as a
directory name, a value with `/` or `..` would point outside the run directory. Labels
keep the user's text; ids and names come from `slug`, made for the purpose:

- only `a-z`, `0-9`, `-` and `_`, starting with a letter: a valid Textual id, CSS
  selector and file name everywhere, never `.`, `..` or a path;
- a name that is already such a slug is its own slug (`gunicorn-sync`, `url1`), so ids
  stay readable and stable;
- any other name gets a short hash of the whole text after its readable part, so two
  names that differ only in the characters replaced (`a:b=1`, `a,b-1`) never share
  a slug;
- at most `MAX_LEN` characters (a file name, a socket path's directory).
"""

from __future__ import annotations

import hashlib
import re

MAX_LEN = 48
_SAFE = re.compile(r"^[a-z][a-z0-9_-]*$")
_UNSAFE = re.compile(r"[^a-z0-9_-]+")


def slug(text: str, prefix: str = "s") -> str:
    """A safe, unique-per-text name for `text` (see the module's docstring); `prefix`
    starts a slug whose text does not start with a letter."""
    if _SAFE.match(text) and len(text) <= MAX_LEN:
        return text
    readable = _UNSAFE.sub("-", text.lower()).strip("-_")
    if not readable or not readable[0].isalpha():
        readable = f"{prefix}-{readable}".rstrip("-")
    digest = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{readable[: MAX_LEN - 9].rstrip('-_')}-{digest}"
