"""Short figures for panes and tables (no Textual here)."""

from __future__ import annotations

from stackrace.engine.model import FAILURE_KINDS
from stackrace.settings.units import fmt_bytes, fmt_count, fmt_us

# the panes' colours, in the order stacks join a race (the race screen and its dialogs)
PALETTE = ("#4FC3F7", "#FFB74D", "#81C784", "#F06292", "#BA68C8", "#FFF176", "#4DB6AC", "#E57373")

__all__ = [
    "FAILURE_LABELS",
    "PALETTE",
    "fmt_bytes",
    "fmt_clock",
    "fmt_count",
    "fmt_lat",
    "fmt_level",
    "fmt_mb",
    "fmt_rate",
    "fmt_us",
]

# Pane labels for the engine's failure kinds, in the engine's order.
FAILURE_LABELS: dict[str, str] = {
    "refused": "refused",
    "connect_timeout": "conn timeout",
    "tls": "TLS",
    "reset": "reset",
    "timeout": "timeout",
    "http_status": "HTTP",
    "invalid_body": "bad body",
    "protocol": "protocol",
    # HTTP/2's, per stream: the reset's error codes are added from `errors` (pane_text.py)
    "stream_reset": "RST_STREAM",
    "stream_refused": "refused stream",
    "goaway_unprocessed": "GOAWAY unprocessed",
    "flow_stall": "flow stall",
    "dropped": "dropped",
    "abandoned": "abandoned",
    "other": "other",
}
assert set(FAILURE_LABELS) == set(FAILURE_KINDS)


def fmt_mb(n: int | None) -> str:
    """Bytes as MiB with one decimal below 100, none above: '41.2 MiB', '812 MiB'."""
    if n is None:
        return "–"
    mb = n / (1024 * 1024)
    return f"{mb:.1f} MiB" if mb < 100 else f"{mb:.0f} MiB"


def fmt_rate(n: float) -> str:
    """A short rate for a scale label: 90, 950, 7.0k, 14k."""
    if n < 1000:
        return f"{n:.0f}"
    k = n / 1000
    return f"{k:.1f}k" if k < 10 else f"{k:.0f}k"


def fmt_clock(seconds: float) -> str:
    """Race time as m:ss (h:mm:ss past an hour): when a verdict began."""
    s = max(0, int(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def fmt_level(level: int, rate_mode: bool = False) -> str:
    return f"{level:,} req/s" if rate_mode else f"c={level:,}"


def fmt_lat(us: float) -> str:
    """Latency in at most 6 characters, 3 significant digits: 850µs, 12.8ms, 187ms, 1.25s."""
    if us < 1000:
        return f"{us:.0f}µs"
    ms = us / 1000
    if ms < 10:
        return f"{ms:.2f}ms"
    if ms < 100:
        return f"{ms:.1f}ms"
    if ms < 1000:
        return f"{ms:.0f}ms"
    s = ms / 1000
    return f"{s:.2f}s" if s < 10 else f"{s:.1f}s" if s < 100 else f"{s:.0f}s"
