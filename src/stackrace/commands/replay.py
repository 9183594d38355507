"""`stackrace replay FILE`: play a recorded race in the app, with no servers and no engine."""

from __future__ import annotations

import argparse
import sys

from stackrace.base import printable
from stackrace.commands.parser import examples

EXAMPLES = examples(
    (
        "stackrace --demo --stacks uvicorn,gunicorn-sync --go --record race.jsonl.gz",
        "record a race (here a synthetic one)",
    ),
    ("stackrace replay race.jsonl.gz", "play it back: no servers, no engine"),
    ("stackrace replay race.jsonl.gz --speed 4", "four times as fast"),
    ("stackrace replay race.jsonl.gz --paused --big", "paused (space plays), projector mode"),
)


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Play a recorded race in the app, as it was: every interval's figures and each "
        "slider move, with no servers and no engine, so a demo cannot fail on stage."
    )
    parser.epilog = EXAMPLES + "\n\nMore: docs/tui.md"
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
    parser.add_argument("--big", action="store_true", help="projector mode (key b)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from stackrace.race.live.replay import SPEEDS, ReplayPlayer
    from stackrace.race.playback.recording import RecordingError, load_recording

    try:
        recording = load_recording(args.file)
    except RecordingError as exc:
        print(f"stackrace replay: {printable.terminal(str(exc))}", file=sys.stderr)
        return 2
    if not recording.members:
        print(
            f"stackrace replay: {printable.terminal(str(args.file))}: no stacks were recorded",
            file=sys.stderr,
        )
        return 2
    player = ReplayPlayer(recording)
    player.speed = min(SPEEDS, key=lambda s: abs(s - args.speed))
    player.paused = args.paused
    from stackrace.tui.app import StackraceApp, exit_status

    app = StackraceApp(
        player.session,
        player.plan,
        [],
        show_picker=False,
        drive=lambda: player.advance(0.25),
        projector=args.big,
        player=player,
    )
    app.argv = list(getattr(args, "argv", []) or [])
    return exit_status(app, app.run() or 0)
