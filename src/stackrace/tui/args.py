"""The app's command-line options, for `stackrace` (cli.py) and `python -m stackrace.tui`.

No Textual import here: cli.py may call `add_app_arguments(parser)` cheaply.
"""

from __future__ import annotations

import argparse

from stackrace.metrics.flags import add_metrics_arguments
from stackrace.options import positive_int


def add_app_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        action="append",
        metavar="URL",
        help="also load a server stackrace did not start (repeatable); a bare base URL "
        "gets the workload's path",
    )
    parser.add_argument(
        "--pid",
        action="append",
        type=positive_int,
        metavar="PID",
        help="the process behind the matching --url, for its memory and CPU "
        "(otherwise found from the listening port when possible)",
    )
    parser.add_argument(
        "-c",
        "--concurrency",
        type=positive_int,
        default=None,
        help="starting connections per stack",
    )
    parser.add_argument("--demo", action="store_true", help="a synthetic race: no servers, no load")
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a --url host that is not on this machine (refused otherwise)",
    )
    add_metrics_arguments(parser)  # --metrics: the race's figures for Prometheus
