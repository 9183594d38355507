"""The command line's parser: usage errors in one line naming the command, with the
nearest option or what a flag of wrk, hey, oha or ab is called here; `--help` as a
person reads it (prose re-wrapped, Examples kept line for line, every default said).

The value parsers it calls are stackrace.settings.parsers' and race_parsers': one
place says what a valid value is, for a command line, a preset and a run file alike;
this module is only how the command line says it.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import textwrap
from collections.abc import Sequence
from typing import Any, NoReturn


class HelpFormatter(argparse.HelpFormatter):
    """`--help` as a person reads it: prose re-wrapped to the terminal, but the Examples
    (an epilog starting `EXAMPLES`) kept line for line, as command lines must be; and a
    default said after every option that has one and whose help does not say it."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith(EXAMPLES):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return "\n".join(
            textwrap.wrap(
                " ".join(text.split()),
                width,
                initial_indent=indent,
                subsequent_indent=indent,
                break_on_hyphens=False,
            )
        )

    def _split_lines(self, text: str, width: int) -> list[str]:
        # an option's name is never cut at its hyphen ("--help-", "cluster")
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        unsaid = default is None or default is argparse.SUPPRESS or isinstance(default, bool)
        if "default" in text or unsaid or default == [] or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


EXAMPLES = "Examples:"


def examples(*lines: tuple[str, str]) -> str:
    """A help's Examples section (its epilog): each (command line, what it does), the
    command under a comment line. The walkthrough tier runs every one of them
    (tests/walkthrough/readme.py `help_lines`)."""
    out = [EXAMPLES]
    for command, what in lines:
        out += [f"  # {what}", f"  {command}"]
    return "\n".join(out)


def epilog(examples: str, more: str | None = None) -> str:
    """A command's epilog: its Examples, then the pages that say more (`docs/x.md`)."""
    return examples + (f"\n\nMore: {more}" if more else "")


def describe(
    p: argparse.ArgumentParser, description: str, examples: str, more: str | None = None
) -> None:
    """A command's help, as every command's reads: what it does (re-wrapped to the
    terminal), its examples (kept line for line), and where to read more."""
    p.description = description
    p.epilog = epilog(examples, more)


# flags of wrk, wrk2, hey, oha and ab that differ here: what each is called in stackrace,
# said when one is typed (the option named must be one of the command's)
OTHER_TOOLS: dict[str, tuple[str, str]] = {
    "-n": ("ab's and hey's -n (a number of requests) is --requests here", "--requests"),
    "-z": ("hey's and oha's -z (a duration) is --duration here", "--duration"),
    "-t": ("wrk's -t (threads) is --procs here; hey's -t (a timeout) is --timeout", "--procs"),
    "-q": ("hey's and oha's -q (a rate) is --rate here, req/s in all", "--rate"),
    "-R": ("wrk2's -R (a rate) is --rate here", "--rate"),
    "-D": ("hey's and oha's -D (a body file) is --body-file here", "--body-file"),
    "-T": ("hey's and oha's -T (a content type) is -H 'Content-Type: …' here", "--header"),
    "-A": ("hey's -A (accept) is -H 'Accept: …' here", "--header"),
    "-s": ("wrk's -s (a Lua script): --scenario FILE is a TOML file of requests", "--scenario"),
    "-o": ("hey's -o (an output format) is --json here", "--hdr-out"),
    "--latency": ("wrk's --latency: the latency distribution is always printed here", "--hdr-out"),
    "--disable-keepalive": ("oha's --disable-keepalive is --no-keepalive here", "--no-keepalive"),
    "-disable-keepalive": ("hey's -disable-keepalive is --no-keepalive here", "--no-keepalive"),
    "-p": (
        "ab's -p (a POST body file) is -m POST --body-file FILE here; oha's -p "
        "(HTTP/2 streams per connection) is --streams",
        "--body-file",
    ),
}


class OneLineArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line, `PROG: MESSAGE`, exit status 2.

    argparse's default prints the whole usage block first, which buries the one thing
    the user needs (which option, what was wrong); `--help` still shows the usage.
    Subparsers made with `add_subparsers().add_parser` inherit the class.

    The line names the command it is about (`stackrace load: unrecognized arguments:
    -t 4`, never the program alone: argparse reports a subcommand's unknown arguments
    from the top parser) and helps: the nearest option of that command ("did you mean
    --requests?"), and what a flag of wrk, hey, oha or ab is called here (`OTHER_TOOLS`).

    Option prefixes are never guessed (`allow_abbrev=False`): with argparse's default,
    `bench --app x` was taken as `--app-node x`, and a new option could silently change
    what an old command line means.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]  # argparse's own kwargs

    def parse_known_args(  # type: ignore[override]  # argparse's own signature
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # the words given, for a hint about an unknown option that argparse reports as
        # something else (`stackrace --stack uvicorn`: "invalid choice: 'uvicorn'")
        self._given = list(sys.argv[1:] if args is None else args)
        parsed, extras = super().parse_known_args(args, namespace)
        if extras and " " in self.prog:
            # a subcommand's (`stackrace load`): said here, under its name
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        # our parsers (here, settings/race_parsers.py) raise ValueError with the reason;
        # argparse would print only "invalid positive_int value" for it. The builtin
        # types (int, float) keep argparse's own message. (_get_value is argparse's hook
        # for the type call; Python 3.11's, unchanged since 3.2.)
        parse = self._registry_get("type", action.type, action.type)
        if not callable(parse) or isinstance(parse, type):
            return super()._get_value(action, arg_string)
        try:
            return parse(arg_string)
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentError(action, str(exc)) from None
        except ValueError as exc:
            raise argparse.ArgumentError(action, str(exc)) from None

    def error(self, message: str) -> NoReturn:
        message = self._unknown_option_first(message)
        self.exit(2, f"{self.prog}: {message}{self.hint(message)}\n")

    def _unknown_option_first(self, message: str) -> str:
        """An unknown option before the word argparse took for a command is the error
        (`stackrace --stack uvicorn` is `--stack`, not a command named `uvicorn`)."""
        choice = re.match(r"argument \S+: invalid choice: '([^']*)'", message)
        given = getattr(self, "_given", [])
        if choice is None or choice.group(1) not in given:
            return message
        i = given.index(choice.group(1))
        flag = given[i - 1] if i > 0 else ""
        if flag.startswith("-") and flag.split("=")[0] not in self._option_string_actions:
            return f"unrecognized arguments: {flag} {given[i]}"
        return message

    def hint(self, message: str) -> str:
        """What the user may have meant ("" when nothing is near)."""
        ours = list(self._option_string_actions)
        if message.startswith("unrecognized arguments: "):
            said = []
            for word in message.removeprefix("unrecognized arguments: ").split():
                flag = word.split("=")[0]
                if not flag.startswith("-"):
                    continue
                other = OTHER_TOOLS.get(flag)
                if other is not None and other[1] in ours:
                    said.append(other[0])
                    continue
                near = difflib.get_close_matches(flag, ours, n=1, cutoff=0.6)
                if near:
                    said.append(f"did you mean {near[0]}?")
            return f" ({'; '.join(said)})" if said else ""
        choice = re.match(r"argument \S+: invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if choice:
            names = re.findall(r"'([^']*)'", choice.group(2))
            near = difflib.get_close_matches(choice.group(1), names, n=1, cutoff=0.6)
            return f" (did you mean {near[0]}?)" if near else ""
        return ""


def note(prog: str, text: str) -> None:
    """Print a note about an adjusted option to stderr, one line, prefixed by the program."""
    print(f"{prog}: note: {text}", file=sys.stderr)
