"""How one target's load is spread: over the engine processes that carry it (the
driver, engine/client.py) and, inside a process, a request budget over its connections
(engine/target.py) — the same rule both times, so the parts always add up to the whole.

Connections and budgets are whole numbers spread as evenly as possible (`split`: the
first parts take the remainder); a rate is shared in equal parts (`split_rate`). A
process opens no more connections than its descriptors allow (`fd_problem`), which is
said before any is opened, with what to do about it.
"""

from __future__ import annotations

from collections.abc import Sequence

FD_RESERVE = 64  # file descriptors an engine process needs besides its connections


def split(n: int, parts: int) -> list[int]:
    """Spread n as evenly as possible over parts (the first ones get the remainder)."""
    base, extra = divmod(n, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def split_rate(rate: float | None, n: int) -> list[float | None]:
    """A rate (None: closed loop) in n equal parts."""
    return [None if rate is None else rate / n] * n


def fd_problem(nofiles: Sequence[int], extra: int) -> str | None:
    """Why `extra` connections more cannot be spread over processes whose descriptor
    limits are `nofiles` (0: not known), or None when they can."""
    for nofile, n in zip(nofiles, split(extra, len(nofiles)), strict=True):
        if nofile and n + FD_RESERVE > nofile:
            return (
                f"{extra} connections need {n + FD_RESERVE} open files per engine process "
                f"but the limit is {nofile} (raise it with `ulimit -n`, or use more "
                "--procs)"
            )
    return None
