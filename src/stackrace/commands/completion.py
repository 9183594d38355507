"""`stackrace completion bash|zsh|fish`: the shell's completion script for stackrace.

    eval "$(stackrace completion bash)"                      # ~/.bashrc
    stackrace completion fish > ~/.config/fish/completions/stackrace.fish

Completion is argcomplete's: the script asks stackrace itself, on each Tab, what may
follow (`complete()` below answers from the real parser), so it never goes stale when
stackrace is upgraded, and it can offer values only known at run time: the stack names
of the stacks file in use, after `serve`, `verify`, `install` and `bench --stacks`.
shtab was the other candidate (a static script, no Tab-time cost) but writes no fish.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from stackrace.commands.parser import describe, examples
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.definition import ConfigError

SHELLS = ("bash", "zsh", "fish")
# arguments whose values are stack names: positional NAMEs, and bench's --stacks A,B
_STACK_DESTS = ("names", "stacks")


EXAMPLES = examples(
    ('eval "$(stackrace completion bash)"', "bash: in ~/.bashrc"),
    ('eval "$(stackrace completion zsh)"', "zsh: in ~/.zshrc"),
    (
        "stackrace completion fish > ~/.config/fish/completions/stackrace.fish",
        "fish: once",
    ),
)


def register(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "Print the shell completion script: Tab then completes commands, options and stacks.",
        EXAMPLES,
    )
    p.add_argument("shell", choices=SHELLS, help="the shell to print the script for")
    p.set_defaults(func=run, read_options=completion_options)


def completion_options(args: argparse.Namespace) -> str:
    """The one option: the shell the script is for."""
    return str(args.shell)


def run(shell: str) -> int:
    import argcomplete  # lazy: only when completing

    sys.stdout.write(argcomplete.shellcode(["stackrace"], shell=shell))
    return 0


def stack_names(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    """The stacks of the file the command would read; after a comma (`--stacks a,b`),
    the rest of the list."""
    try:
        names = list(load_stacks(getattr(parsed_args, "stacks_file", None), check_trust=False))
    except ConfigError:
        return []
    head, comma, last = prefix.rpartition(",")
    lead = head + comma
    return [lead + n for n in names if n.startswith(last)]


def complete(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request (argcomplete's protocol) and exit."""
    import argcomplete  # lazy: only when completing

    for action in _walk(parser):
        if action.dest in _STACK_DESTS:
            action.completer = stack_names  # type: ignore[attr-defined]  # argcomplete's hook
    argcomplete.autocomplete(parser)


def _walk(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    out: list[argparse.Action] = []
    for action in parser._actions:
        out.append(action)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out += _walk(sub)
    return out
