"""The one entry point: `stackrace` opens the TUI; subcommands run headless.

Each subcommand lives in its own module under `stackrace.commands` and exposes
`register(subparsers)`; the module is imported only when needed so start-up stays fast.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import select
import signal
import sys
from pathlib import Path

from stackrace import __version__
from stackrace.base import paths, printable, startgc
from stackrace.base.errors import StackraceError
from stackrace.commands.parser import OneLineArgumentParser, examples
from stackrace.supervise import sweep

EXAMPLES = examples(
    ("stackrace", "the picker: choose stacks, a workload, a level, and race"),
    ("stackrace --stacks gunicorn-sync,uvicorn --workload io -c 10 --go", "race two at once"),
    ("stackrace --demo", "a synthetic race: no servers, nothing to install"),
    ("stackrace --app examples/flask_app:app --go", "your app under every server that runs it"),
    ("stackrace load http://127.0.0.1:8000/hello -c 50 -d 10s", "load one server, as wrk does"),
    (
        "stackrace bench --stacks gunicorn-sync,uvicorn --concurrency 10,100",
        "compare stacks headless",
    ),
)

# (subcommand, one-line help): the subcommand is also its module under stackrace.commands
COMMANDS: list[tuple[str, str]] = [
    ("load", "load one server (a URL, several of its URLs, or your paths): a wrk-like summary"),
    ("stacks", "list the stacks from stacks.toml and whether each is available"),
    ("install", "install what the chosen stacks need (apt, pip, builds)"),
    ("serve", "start stacks, print their URLs, stop everything on Ctrl-C"),
    ("verify", "start stacks and check every endpoint against the contract"),
    ("db", "the private MariaDB: up, down, status, seed, reset"),
    ("bench", "headless comparison of stacks, with reports and a regression gate"),
    ("report", "render or compare saved bench runs"),
    ("tune", "the best configuration of a server for this machine under an SLO"),
    ("replay", "play a recorded race in the app: no servers, no engine"),
    ("web", "serve the app in a browser (textual-serve), on 127.0.0.1 by default"),
    ("completion", "print the shell completion script (bash, zsh or fish)"),
    ("clean", "stop the private MariaDB and remove what stackrace made"),
]


# build_parser(only=APP): the app's options and each command's name, no command's module
APP = ""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every command's options (`only=None`: completion, the
    help tests), one command's (`only=NAME`), or the app's alone (`only=APP`). A command
    not asked for is a name and its help line: its module (and what it imports) is never
    imported, which keeps `stackrace --help` and `stackrace load` fast to start."""
    # one-line usage errors ("stackrace load: argument --rate: must be ..."), for every
    # subcommand too: add_parser() makes subparsers of the same class
    parser = OneLineArgumentParser(
        prog="stackrace",
        description="Race web-server stacks side by side, live: the same load on each, "
        "their req/s, latency, failures, memory and CPU as they happen. With no command, "
        "opens the app (docs/tui.md); the commands run headless.",
        epilog=EXAMPLES + f"\n\nDocumentation: {paths.docs_dir()}\n  tui.md, your-app.md, "
        "load.md, bench.md, tune.md, stacks.md, db.md,\n  engine.md, cluster.md, …",
    )
    parser.add_argument("--version", action="version", version=f"stackrace {__version__}")
    files = parser.add_argument_group("which stacks exist (docs/stacks.md)")
    files.add_argument(
        "--stacks-file",
        default=None,
        metavar="FILE",
        help="use this stacks file alone (default: the shipped stacks.toml, with "
        "~/.config/stackrace/stacks.toml and ./stacks.toml on top when they exist, each "
        "adding stacks and replacing those of the same name)",
    )
    files.add_argument(
        "--no-tunable-limits",
        action="store_true",
        help="allow workers and threads above this machine's ceilings (from its cores "
        "and memory; see `stackrace stacks`)",
    )
    if not only:
        # only for the app, or every command: not imported for a command's own line
        from stackrace.commands import app_args, cluster_args  # lazy: keeps load's start fast

        app_args.add_app_arguments(parser)
        # `stackrace --cluster ADDRESS`: the app on a cluster
        cluster_args.add_cluster_arguments(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS:
        if only is not None and name != only:
            sub.add_parser(name, help=help_text, add_help=False)
            continue
        mod = importlib.import_module(f"stackrace.commands.{name}")
        mod.register(sub.add_parser(name, help=help_text, description=help_text))
    return parser


# errors of the machine's state while writing, not bugs: a read-only or full file system
_STORAGE_ERRNOS = frozenset({errno.EROFS, errno.ENOSPC, errno.EDQUOT})
# a file or directory this user may not use, or a file where a directory should be (a
# home that is not writable for a user who is not root): said with the path, no crash log
_ACCESS_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.ENOTDIR})


def main(argv: list[str] | None = None) -> int:
    """Run stackrace; an unexpected exception is one line and a crash log, exit 70."""
    given = sys.argv[1:] if argv is None else list(argv)
    if argv is None:
        # run as the program (the console script, `python -m stackrace`): the stacks'
        # orphans (a daemon an app double-forks) are re-parented to stackrace, not to
        # init, so that its stop finds and reaps them (stackrace.supervise.sweep). A
        # process that calls main() with its own arguments (a test) or embeds the
        # launcher (a cluster's app host, whose watchdog detaches by forking away) is
        # not made one behind its back
        sweep.become_subreaper()
        # the cyclic collector waits while the command imports (base/startgc.py): it
        # keeps start-up fast. Only as the program: a caller's collector is its own
        startgc.pause()
    try:
        rc = _main(argv)
        sys.stdout.flush()  # here, where a reader gone away is still ours to handle
        return rc
    except StackraceError as exc:  # the user's input or the machine's state, not a bug
        command = next((a for a in given if a in {n for n, _ in COMMANDS}), None)
        # the message may quote a file, a server or an app: never a raw control byte
        line = printable.terminal(str(exc), newlines=True)
        print(f"stackrace{' ' + command if command else ''}: {line}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError as exc:
        if not _stdout_reader_gone():  # a pipe of ours broke: a bug like any other
            return _crash(exc, given)
        # `stackrace stacks | head`: the reader had what it wanted. Python's recipe:
        # stdout to /dev/null, so the flush at exit does not fail again; the status a
        # shell shows for a command ended by SIGPIPE
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except OSError as exc:
        if exc.errno in _STORAGE_ERRNOS or (exc.errno in _ACCESS_ERRNOS and exc.filename):
            print(f"stackrace: {storage_line(exc)}", file=sys.stderr)
            return 1
        return _crash(exc, given)
    except Exception as exc:  # a bug of ours: the user gets one line and a file
        return _crash(exc, given)
    finally:
        startgc.resume()  # on again however the command ended (a usage error, say)


def _crash(exc: BaseException, given: list[str]) -> int:
    """A bug of ours: one line naming a crash log (base/crashlog.py), exit 70."""
    from stackrace.base import crashlog  # lazy: only on a crash (keeps every start fast)

    return crashlog.report("stackrace", exc, given)


def storage_line(exc: OSError) -> str:
    """One line for a write that a read-only or full file system refused: the directory
    it was in when the error names a file, else stackrace's own directories (where
    nearly everything it writes goes), and how to move them."""
    why = exc.strerror or str(exc)
    if exc.filename and exc.errno in _ACCESS_ERRNOS:
        return f"cannot use {os.fsdecode(exc.filename)}: {why}"
    if exc.filename:
        where = Path(os.fsdecode(exc.filename))
        return (
            f"cannot write in {where if where.is_dir() else where.parent}: {why} "
            f"(${paths.ENV_HOME} puts stackrace's files elsewhere)"
        )
    return (
        f"cannot write: {why} (stackrace writes in {paths.cache_dir()} and "
        f"{paths.data_dir()}; ${paths.ENV_HOME} puts them elsewhere)"
    )


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe whose reader closed it (poll says POLLERR)."""
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _fd, events in poll.poll(0))
    except (OSError, ValueError):
        return False


def _main(argv: list[str] | None) -> int:
    if argv is None and "_ARGCOMPLETE" in os.environ:
        # a Tab in a shell that sourced `stackrace completion SHELL`: answer and exit
        from stackrace.commands.completion import complete  # lazy: only for a Tab

        complete(build_parser())
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--version"]:  # asked by scripts and CI logs: no parser to build for it
        print(f"stackrace {__version__}")
        return 0
    first = next((a for a in argv if a in {n for n, _ in COMMANDS}), None)
    if first == "load" and not {"-h", "--help", "--cluster"} & set(argv):
        # `load` wants an engine: forked once its imports are done (engine/early.py)
        from stackrace.engine import early  # lazy: only load's

        early.start()
    parser = build_parser(only=APP if first is None else first)
    # the line as given, a default of the parse (`web` passes the app's options on to
    # each page; a crash log names it)
    parser.set_defaults(argv=list(argv))
    args = parser.parse_args(argv)
    if args.no_tunable_limits:
        from stackrace.stacks.ceilings import lift_limits  # lazy: keeps --help's start-up fast

        lift_limits()
    if args.command is None:
        return _open_app(args)
    # each command reads the parsed line into its own frozen options struct, and runs on
    # that alone (commands/*: `read_options`): nothing past it knows argparse
    options = args.read_options(args)
    startgc.resume()  # the command's modules are imported: base/startgc.py
    try:
        rc = args.func(options)
    except KeyboardInterrupt:
        # Ctrl-C in a blocking step (a database start, an install): the usual exit
        # status, not a traceback; commands that handle it themselves never get here
        print(f"stackrace {args.command}: interrupted", file=sys.stderr)
        return 130
    return int(rc or 0)


def _open_app(args: argparse.Namespace) -> int:
    """`stackrace [OPTIONS]`: the app, on this machine or, with --cluster, on a cluster
    (its own front end over the app's command: commands/app_cluster.py). The collector
    stays paused until the app's first frame (tui/app.py on_mount)."""
    from stackrace.commands.app_args import app_command_options  # lazy: keeps load's start fast

    options = app_command_options(args)
    if options.cluster.wanted:
        from stackrace.commands import app_cluster  # lazy: only with --cluster

        return app_cluster.run(options)
    from stackrace.commands import app  # lazy: only the app imports Textual

    return app.run(options)


if __name__ == "__main__":
    sys.exit(main())
