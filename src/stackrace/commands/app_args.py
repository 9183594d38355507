"""The app's command-line options, for `stackrace` (cli.py) and `python -m stackrace.tui`.

No Textual import here: cli.py may call `add_app_arguments(parser)` cheaply.
"""

from __future__ import annotations

import argparse

from stackrace.commands.metrics_args import add_metrics_arguments
from stackrace.settings.options import positive_int


def add_app_arguments(parser: argparse.ArgumentParser) -> None:
    from stackrace.race.core.urls import add_url_arguments

    add_url_arguments(parser)  # --url [NAME=]URL, --pid: as in bench
    parser.add_argument(
        "-c",
        "--concurrency",
        type=positive_int,
        default=None,
        help="starting connections per stack",
    )
    parser.add_argument(
        "--demo", action="store_true", help="a synthetic race: no servers, no load (labelled so)"
    )
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a --url host that is not on this machine (refused otherwise)",
    )
    add_metrics_arguments(parser)  # --metrics: the race's figures for Prometheus
    add_race_arguments(parser)
    from stackrace.stacks import userapp

    userapp.add_arguments(parser.add_argument_group("your app (README: Your app)"))


def add_race_arguments(parser: argparse.ArgumentParser) -> None:
    """What to race and how, from the one settings declaration, plus the app's own."""
    from stackrace.settings.race_settings import BENCH_ONLY, add_options

    group = parser.add_argument_group("the race (the picker's choices, or with --go none)")
    add_options(group, skip=BENCH_ONLY)
    group.add_argument(
        "--preset",
        metavar="NAME",
        help="settings and stacks of a stored scenario (presets/NAME.toml); options override",
    )
    group.add_argument(
        "--go",
        action="store_true",
        help="start the race at once with the stacks given (--stacks or --preset), no picker",
    )
    show = parser.add_argument_group("presenting")
    show.add_argument(
        "--big",
        action="store_true",
        help="projector mode: only req/s, p99, waiting, failures, RSS and CPU, large (key b)",
    )
    show.add_argument(
        "--talk",
        metavar="FILE",
        help="a talk track: levels with timings and captions, played from the start",
    )
    show.add_argument(
        "--record",
        metavar="FILE",
        help="record the race (every interval's figures, histograms, each slider move) for "
        "`stackrace replay FILE`",
    )
    show.add_argument(
        "--ghost",
        action="append",
        metavar="FILE",
        help="overlay a saved bench run (.json) or a recording beside the live panes, "
        "at the same level (repeatable)",
    )
