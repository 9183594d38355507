"""Body checks: a serialisable `BodyCheck` compiled into a function the hot path calls."""

from __future__ import annotations

import json
from collections.abc import Callable

from stackrace.engine.model import BodyCheck

CHECK_KINDS = ("exact", "contains", "json", "float_range", "nonempty")


def compile_check(check: BodyCheck | None) -> Callable[[bytes], bool] | None:
    if check is None:
        return None
    kind = check.kind
    if kind == "exact":
        expected = check.arg.encode()
        return expected.__eq__
    if kind == "contains":
        needle = check.arg.encode()
        return lambda body: needle in body
    if kind == "json":
        # equal as JSON values: serializers differ in spacing, not in meaning
        expected_value: object = json.loads(check.arg)
        exact = check.arg.encode()

        def same_json(body: bytes) -> bool:
            if body == exact:
                return True
            try:
                got: object = json.loads(body)
                return got == expected_value
            except (ValueError, RecursionError):  # a server's body nested 100,000 deep
                return False

        return same_json
    if kind == "nonempty":
        return bool
    if kind == "float_range":
        lo, hi = check.lo, check.hi

        def in_range(body: bytes) -> bool:
            try:
                value = float(body)
            except ValueError:
                return False
            return lo <= value <= hi

        return in_range
    raise ValueError(f"unknown body check kind {kind!r} (known: {', '.join(CHECK_KINDS)})")
