"""`stackrace replay FILE`: play a recorded race in the app, with no servers and no engine."""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stackrace.base import printable
from stackrace.commands.app_args import add_big_argument
from stackrace.commands.namespace import typed_options
from stackrace.commands.parser import describe, examples
from stackrace.report.write import EXIT_NOT_WRITTEN, check_output_paths, write_files

if TYPE_CHECKING:
    from stackrace.race.live.replay import ReplayPlayer

EXAMPLES = examples(
    (
        "stackrace --demo --stacks uvicorn,gunicorn-sync --go --record race.jsonl.gz",
        "record a race (here a synthetic one)",
    ),
    ("stackrace replay race.jsonl.gz", "play it back: no servers, no engine"),
    ("stackrace replay race.jsonl.gz --speed 4", "four times as fast"),
    ("stackrace replay race.jsonl.gz --paused --big", "paused (space plays), projector mode"),
    ("stackrace replay race.jsonl.gz --html race.html", "the race as one offline page, no app"),
)


def register(parser: argparse.ArgumentParser) -> None:
    describe(
        parser,
        "Play a recorded race in the app, as it was: every interval's figures and each "
        "slider move, with no servers and no engine, so a demo cannot fail on stage.",
        EXAMPLES,
        "docs/tui.md",
    )
    parser.add_argument(
        "file", metavar="FILE", help="a recording made with `stackrace --record FILE`"
    )
    parser.add_argument(
        "--speed",
        type=float,
        default=1.0,
        help="play speed: 0.25, 0.5, 1, 2, 4, 8 or 16 (default 1)",
    )
    parser.add_argument(
        "--paused", action="store_true", help="start paused, space plays (default: playing)"
    )
    add_big_argument(parser, "projector mode (key b)")
    parser.add_argument(
        "--html",
        dest="html_out",
        metavar="OUT",
        help="write the recorded race as one self-contained HTML page here and exit "
        "(every stack over time, its levels and verdicts; no app is opened)",
    )
    parser.set_defaults(func=run, read_options=replay_options)


@dataclass(frozen=True)
class ReplayOptions:
    """`stackrace replay`'s command line, typed."""

    file: str
    speed: float
    paused: bool
    big: bool
    html_out: str | None
    argv: tuple[str, ...] = ()


def replay_options(args: argparse.Namespace) -> ReplayOptions:
    return typed_options(ReplayOptions, args)


def run(o: ReplayOptions) -> int:
    from stackrace.race.live.replay import SPEEDS, ReplayPlayer  # lazy: keeps completion fast
    from stackrace.race.playback.recording import load_recording  # lazy: keeps completion fast

    problem = check_output_paths({"--html": o.html_out})
    if problem:  # before the file is read: a long recording is not played for nothing
        print(f"stackrace replay: {problem}", file=sys.stderr)
        return 2
    recording = load_recording(o.file)
    if not recording.members:
        print(
            f"stackrace replay: {printable.terminal(str(o.file))}: no stacks were recorded",
            file=sys.stderr,
        )
        return 2
    player = ReplayPlayer(recording)
    if o.html_out:
        return _page(player, o.html_out)
    player.speed = min(SPEEDS, key=lambda s: abs(s - o.speed))
    player.paused = o.paused
    from stackrace.tui.app import StackraceApp, exit_status  # lazy: Textual, only for the app

    app = StackraceApp(
        player.session,
        player.plan,
        [],
        show_picker=False,
        drive=lambda: player.advance(0.25),
        projector=o.big,
        player=player,
    )
    app.argv = list(getattr(o, "argv", []) or [])
    return exit_status(app, app.run() or 0)


def _page(player: ReplayPlayer, out: str) -> int:
    """Play the whole recording with no app, and write its page (race/live/page.py)."""

    from stackrace.race.live.page import session_page, unknown_machine  # lazy: only for --html
    from stackrace.race.live.summary import context  # lazy: only for --html
    from stackrace.race.playback.series import recording_series  # lazy: only for --html

    async def play() -> None:
        await player.start()
        await player.seek(player.duration)

    asyncio.run(play())
    session, header = player.session, player.recording.header
    title = f"stackrace replay: {', '.join(m.name for m in player.recording.members)}"

    def page() -> str:
        series = recording_series(player.recording)
        machine = unknown_machine(header.created)
        return session_page(session, session.summary(), context(session), series, machine, title)

    problems = write_files([("--html", out, page)])
    for line in problems:
        print(f"stackrace replay: {line}", file=sys.stderr)
    if not problems:
        print(f"wrote {out}")
    return EXIT_NOT_WRITTEN if problems else 0
