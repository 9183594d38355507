"""`--metrics [HOST:]PORT` and `--metrics-remote`, for `load`, `bench` and the app, read
into the exporter's typed `MetricsOptions`.

Apart from the exporter so that adding the options costs nothing: the app's arguments
are added on every start of `stackrace` (commands/app_args.py), the exporter (its
socket, its figures) is imported only when asked for.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stackrace.metrics.exporter import MetricsOptions


def parse_address(text: str) -> tuple[str, int]:
    """'9464', ':9464', 'HOST:9464' or '[::1]:9464' → (host, port); host 127.0.0.1 when
    left out. Port 0 picks a free one (the command prints the address)."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    from stackrace.metrics.exporter import DEFAULT_HOST  # lazy: keeps load and --help fast

    host = host.strip("[]") or DEFAULT_HOST
    try:
        number = int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"use [HOST:]PORT, e.g. 127.0.0.1:9464, got {text!r}"
        ) from None
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0 to 65535, got {number}")
    return host, number


def add_metrics_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument(
        "--metrics",
        type=parse_address,
        default=None,
        metavar="[HOST:]PORT",
        help="serve the live figures for Prometheus (OpenMetrics) at "
        "http://HOST:PORT/metrics; HOST defaults to 127.0.0.1",
    )
    parser.add_argument(
        "--metrics-remote",
        action="store_true",
        help="let --metrics listen on an address other hosts can reach",
    )


def metrics_options(args: argparse.Namespace) -> MetricsOptions | None:
    """What --metrics asks for; None without it."""
    address = getattr(args, "metrics", None)
    if address is None:
        return None
    from stackrace.metrics.exporter import MetricsOptions  # lazy: keeps load and --help fast

    host, port = address
    return MetricsOptions(host, port, remote=bool(getattr(args, "metrics_remote", False)))
