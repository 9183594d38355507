"""Parsing and printing durations, latencies, sizes and rates the way load tools do."""

from __future__ import annotations

import re

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_FACTORS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(text: str) -> float:
    """'10s', '500ms', '2m', '1.5' (seconds) -> seconds."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"bad duration {text!r} (use 500ms, 10s, 2m)")
    return float(m.group(1)) * _FACTORS[m.group(2)]


def fmt_us(us: float) -> str:
    """Microseconds as a short human figure: 850µs, 1.25ms, 3.40s."""
    if us < 1000:
        return f"{us:.0f}µs"
    if us < 1_000_000:
        return f"{us / 1000:.2f}ms"
    return f"{us / 1_000_000:.2f}s"


def fmt_count(n: float) -> str:
    if n >= 10_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 100_000:
        return f"{n / 1000:.0f}k"
    if n >= 10_000:
        return f"{n / 1000:.1f}k"
    return f"{n:.0f}"


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return f"{n:.1f}GiB"
