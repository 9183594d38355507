"""The app's command-line options, for `stackrace` (cli.py) and `python -m stackrace.tui`.

No Textual import here: cli.py may call `add_app_arguments(parser)` cheaply.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stackrace.commands.cluster_args import cluster_options
from stackrace.commands.metrics_args import add_metrics_arguments, metrics_options
from stackrace.commands.output_args import add_allow_remote_argument
from stackrace.commands.settings_args import add_options, add_preset_argument, given
from stackrace.commands.target_args import (
    add_url_arguments,
    add_your_app_arguments,
    your_app_options,
)
from stackrace.engine.model import MAX_RATE_PER_PROCESS
from stackrace.settings.parsers import positive_int
from stackrace.settings.race_settings import BENCH_ONLY

if TYPE_CHECKING:
    from stackrace.cluster.options import ClusterOptions
    from stackrace.metrics.exporter import MetricsOptions
    from stackrace.race.live.setup import AppOptions


def add_app_arguments(parser: argparse.ArgumentParser) -> None:
    """The app's options, grouped by what a person wants to do."""
    add_race_arguments(parser)
    add_your_app_arguments(parser.add_argument_group("your app on every server (docs/your-app.md)"))
    servers = parser.add_argument_group("servers you started (docs/your-app.md)")
    add_url_arguments(servers)  # --url [NAME=]URL, --pid: as in bench
    add_allow_remote_argument(
        servers, "allow a --url host that is not on this machine (default: loopback only)"
    )
    add_metrics_arguments(parser.add_argument_group("watching from elsewhere"))


# the settings' help in the app's words (what an SLO does in a live race)
APP_HELP = {
    "slo": "hold every pane to an objective, targets to stay below, e.g. "
    "'p99<50ms,failures<0.1%%' (a percentile p0-p100, mean, max, failures, waiting, rss, "
    "cpu): each pane says whether it meets it (default: none)",
    "rate": "a constant rate per stack, req/s, instead of connections (at most "
    f"{MAX_RATE_PER_PROCESS:,}: a stack's engine process schedules no more) (default: "
    "closed loop)",
}


def add_race_arguments(parser: argparse.ArgumentParser) -> None:
    """What to race and how, from the one settings declaration, plus the app's own."""
    start = parser.add_argument_group("what to race (the picker's choices; with --go, no picker)")
    add_preset_argument(
        start, "settings and stacks of a stored scenario (presets/NAME.toml); options override"
    )
    start.add_argument(
        "--go",
        action="store_true",
        help="start the race at once with the stacks given (--stacks or --preset), no picker",
    )
    start.add_argument(
        "-c",
        "--concurrency",
        type=positive_int,
        default=None,
        metavar="N",
        help="starting connections per stack (default 10; the slider moves it live)",
    )
    start.add_argument(
        "--demo",
        action="store_true",
        help="a synthetic race: no servers, no load, labelled so everywhere",
    )
    add_options(start, only=("stacks", "workload", "io_ms", "queries"))
    how = parser.add_argument_group("how each stack is loaded")
    add_options(how, skip=(*BENCH_ONLY, "stacks", "workload", "io_ms", "queries"), helps=APP_HELP)
    show = parser.add_argument_group("presenting")
    add_big_argument(
        show, "projector mode: only req/s, p99, waiting, failures, RSS and CPU, large (key b)"
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


def add_big_argument(group: argparse._ArgumentGroup | argparse.ArgumentParser, help: str) -> None:
    """--big: projector mode (the app, replay)."""
    group.add_argument("--big", action="store_true", help=help)


def app_options(args: argparse.Namespace) -> AppOptions:
    """The app's command line, typed: what race/live/setup.py builds the race from."""
    from stackrace.race.live.setup import AppOptions  # lazy: keeps --help's start fast

    return AppOptions(
        given=given(args, skip=BENCH_ONLY),
        preset=args.preset,
        go=bool(args.go),
        concurrency=args.concurrency,
        demo=bool(args.demo),
        urls=tuple(args.url or ()),
        pids=tuple(args.pid or ()),
        allow_remote=bool(args.allow_remote),
        stacks_file=getattr(args, "stacks_file", None),
        your_app=your_app_options(args),
        talk=args.talk,
        ghosts=tuple(args.ghost or ()),
        record=args.record,
        big=bool(args.big),
        argv=tuple(getattr(args, "argv", None) or ()),
    )


@dataclass(frozen=True)
class AppCommandOptions:
    """`stackrace [OPTIONS]`, typed: the race the app opens (`AppOptions`, what
    race/live/setup.py builds it from), and what the command binds around it."""

    app: AppOptions
    metrics: MetricsOptions | None
    cluster: ClusterOptions


def app_command_options(args: argparse.Namespace) -> AppCommandOptions:
    return AppCommandOptions(app_options(args), metrics_options(args), cluster_options(args))
