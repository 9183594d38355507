"""Expected HTTP statuses, written the way people say them: "200", "2xx", "200-299,404".

One parser for every place a user names the statuses an answer may have: a scenario's
`expect`, `--expect-status`, a stacks block's `health_status`. What is not expected is a
failure (`http_status`) in every figure; by default that is every status of 400 and up,
and the engine needs no list at all (`None`).
"""

from __future__ import annotations

import re

from stackrace.base.errors import StackraceError

_ITEM = re.compile(r"^(?:([1-5])xx|([1-5]\d\d)(?:-([1-5]\d\d))?)$")


class StatusError(StackraceError, ValueError):
    """A status list that cannot be read; the message says why."""


def parse(text: str) -> frozenset[int]:
    """The statuses of `text` ("200", "2xx", "200-299,404"), or StatusError."""
    out: set[int] = set()
    items = [i.strip().lower() for i in str(text).split(",")]
    if not text or not all(items):
        raise StatusError(f"expected statuses like 200, 2xx or 200-299,404, got {text!r}")
    for item in items:
        m = _ITEM.match(item)
        if m is None:
            raise StatusError(f"{item[:20]!r} is not a status (use 200, 2xx or a range 200-299)")
        if m.group(1):
            lo = int(m.group(1)) * 100
            out.update(range(lo, lo + 100))
            continue
        lo = int(m.group(2))
        hi = int(m.group(3) or lo)
        if hi < lo:
            raise StatusError(f"{item!r}: the range runs backwards")
        out.update(range(lo, hi + 1))
    return frozenset(out)


def check(text: str) -> str:
    """`text` normalised (stripped, lower-case), if it parses; for option parsers."""
    parse(text)
    return ",".join(i.strip().lower() for i in text.split(","))


def engine_list(text: str | None) -> list[int] | None:
    """What the engine is given: None when the statuses are the engine's own rule
    (everything below 400 is fine), else the full list."""
    if text is None:
        return None
    codes = parse(text)
    if codes == frozenset(range(100, 400)):
        return None
    return sorted(codes)
