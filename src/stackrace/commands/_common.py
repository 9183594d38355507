"""What several commands share: loading stacks.toml and resolving names, with clean errors,
and the private database's flags of the commands that start stacks (serve, verify)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from stackrace.settings.race_parsers import split_stacks
from stackrace.stacks.app_spec import YourApp
from stackrace.stacks.catalogue import (
    GIVEN,
    SHIPPED,
    StackFile,
    announcement,
    skipped_line,
)
from stackrace.stacks.definition import ConfigError, Stack, StackDef
from stackrace.stacks.variants import resolve

if TYPE_CHECKING:
    from stackrace.settings.race_settings import RaceSettings
    from stackrace.stacks.app_spec import YourApp


def load(
    stacks_file: str | None,
    your_app: YourApp | None = None,
    settings: RaceSettings | None = None,
    *,
    check_trust: bool = True,
) -> StackFile:
    """The stacks files' stacks, plus those made for this run: `SERVER[app]` for --app
    and one per --cmd (stackrace.stacks.userapp), ready on the first of the run's
    requests. A file, an app or requests that cannot be used is a ConfigError, AppError
    or ScenarioError (exit 2: said by cli.py, in one line naming the command).
    `stacks_file`: --stacks-file (None: the shipped file with the user's on top).
    `check_trust=False`: an untrusted ./stacks.toml is read too (to be listed, never
    run: stacks.catalogue.load_stacks)."""
    from stackrace.stacks.resolved import resolve_run  # here: keeps start-up fast

    run_stacks = resolve_run(stacks_file, check_trust=check_trust)  # the one read
    return run_stacks.with_your_app(your_app or _no_app(), settings)


def add_private_db_arguments(p: argparse.ArgumentParser, help: str) -> None:
    """--db: the private MariaDB started for the command, so that /db answers (serve,
    verify; `db`'s own --db is another server's DSN)."""
    # the two exclude each other: argparse refuses both at once, before anything starts
    group = p.add_mutually_exclusive_group()
    group.add_argument("--db", action="store_true", help=help)
    # the default since --db: kept so that scripts written for the old default still run
    group.add_argument("--no-db", action="store_true", help=argparse.SUPPRESS)


def _no_app() -> YourApp:
    return YourApp()


def announce(stacks: StackFile, prog: str = "stackrace", quiet: bool = False) -> None:
    """Name every stacks file read, on stderr, before anything of them runs: a file
    outside the package (./stacks.toml, the config directory's, --stacks-file) must
    never decide what runs unseen. Called once the command's stacks are chosen and
    checked, so that a refusal stays one line. `quiet` (bench's --no-progress): only
    when a file was found rather than asked for (./stacks.toml, the config directory's),
    which is never quiet."""
    if quiet and all(origin in (SHIPPED, GIVEN) for _, origin, _ in stacks.files):
        return
    for line in announcement(stacks):
        print(f"{prog}: {line}", file=sys.stderr)


def trusted_names(stacks: StackFile, prog: str) -> list[str]:
    """Every stack but those a ./stacks.toml not trusted yet adds, for a command that
    takes them all (`install --all`, a bare `verify`); the ones left out are named in
    one line on stderr with the command that trusts them."""
    line = skipped_line(stacks)
    if line:
        print(f"{prog}: {line}", file=sys.stderr)
    return [n for n in stacks if n not in stacks.untrusted]


def resolve_all(
    names: Sequence[str],
    stacks: dict[str, StackDef],
    source: str | None = None,
    *,
    named_in: str,
) -> list[Stack]:
    """Resolve stack names and variants; a ConfigError (exit 2, one line) on the first
    bad one. Errors name `source`, by default the file the stacks came from;
    `named_in`: where the names were written (options.COMMAND_LINE, or the preset or run
    file they came from: a file may not name an executable, see stacks.variants.resolve).

    A stack named twice is refused rather than deduplicated: the user either mistyped
    (and meant another stack) or expects two runs, and a table with one result twice
    (or silently once) answers neither. Two variants of a stack are different names.
    """
    out: list[Stack] = []
    for ref in names:
        for part in split_stacks(ref):
            stack = resolve(part, stacks, source, named_in=named_in)
            if any(s.name == stack.name for s in out):
                raise ConfigError(
                    f"stack '{stack.name}' is named twice; name each stack once "
                    "(variants such as NAME:workers=4 count as different stacks)"
                )
            out.append(stack)
    return out


def serves_workload(stacks: list[Stack], workload: str, prog: str = "stackrace") -> bool:
    """False (and a message naming them) when a stack does not serve the workload's
    endpoint: /dbjson is served by some stacks only, /db not by a stack with db = false."""
    lacking = [s.name for s in stacks if not s.serves(workload)]
    if not lacking:
        return True
    able = "the stacks whose block lists it in `workloads`" if workload != "db" else "db = true"
    print(
        f"{prog}: {', '.join(lacking)} {'does' if len(lacking) == 1 else 'do'} not serve "
        f"the {workload} workload (served by {able}; `stackrace stacks` shows each stack's)",
        file=sys.stderr,
    )
    return False
