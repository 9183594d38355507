"""Each option of the command line is declared once: one `add_*_arguments` function (or
the one settings declaration, commands/settings_args.py) adds it, and every command that
has it calls that function. Two declarations of one flag drift apart (a help that says
another default, a type that parses another way), and a reader cannot tell which one
a command has.

Found by building the whole parser (`stackrace.cli.build_parser`, every subcommand)
while recording which function makes each `add_argument` call: a flag added by two
functions is declared twice (one function may add it two ways, as the settings'
declaration adds a switch with its negation or one way alone). A flag that names
different options in different commands (`--json` to a file in bench, to stdout in `db
status`) is listed in `DIFFERENT` with how many different options carry it and why.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

# flag -> how many different options carry it, and why they are different options
DIFFERENT: dict[str, int] = {
    # bench's --concurrency is a list of levels; in the app and `load` one number of
    # connections (the app's starting level, `load`'s only one, each with its default)
    "--concurrency": 3,
    "-c": 2,
    # `db`'s --db is an existing server's DSN; serve's and verify's ask for the private one
    "--db": 2,
    # install's -n/--dry-run prints the installs; clean's lists the removals; load's -n is
    # ab's number of requests
    "--dry-run": 2,
    "-n": 2,
    # a run's file (bench, tune); the result on stdout (load, stacks, db status)
    "--json": 4,
    # `db up`'s MariaDB port; `web`'s page port
    "--port": 2,
    # bench's and report's page of a run; replay's page of a recording
    "--html": 2,
    # bench runs a saved run again; tune renders a saved tune
    "--from": 2,
}


@contextmanager
def _declarations() -> Iterator[dict[str, set[tuple[str, int]]]]:
    """Every option flag added while inside, with the functions that added it (their
    file and first line)."""
    sites: dict[str, set[tuple[str, int]]] = defaultdict(set)
    add = argparse._ActionsContainer.add_argument

    def recording(self, *flags, **kwargs):
        caller = sys._getframe(1)
        for flag in flags:
            if isinstance(flag, str) and flag.startswith("-"):
                code = caller.f_code  # the declaring function, wherever in it
                sites[flag].add((code.co_filename, code.co_firstlineno))
        return add(self, *flags, **kwargs)

    argparse._ActionsContainer.add_argument = recording  # type: ignore[method-assign]
    try:
        yield sites
    finally:
        argparse._ActionsContainer.add_argument = add  # type: ignore[method-assign]


def declared_twice(sites: dict[str, set[tuple[str, int]]]) -> dict[str, list[str]]:
    allowed = DIFFERENT
    return {
        flag: sorted(f"{path.split('/src/')[-1]}:{line}" for path, line in where)
        for flag, where in sorted(sites.items())
        if len(where) > allowed.get(flag, 1)
    }


def test_every_flag_is_declared_once():
    from stackrace import cli

    with _declarations() as sites:
        cli.build_parser()
    assert len(sites) > 100, "the check must see the whole parser"
    assert declared_twice(sites) == {}
    # each exception still is one: a flag listed here that no longer needs it is removed
    assert [f for f, n in DIFFERENT.items() if len(sites[f]) != n] == []


def test_a_flag_added_in_two_places_is_found():
    with _declarations() as sites:
        one, two = argparse.ArgumentParser(), argparse.ArgumentParser()
        add_same_here(one)
        add_same_there(two)
        for p in (one, two):
            add_once(p)
    assert list(declared_twice(sites)) == ["--same"]


def add_same_here(p: argparse.ArgumentParser) -> None:
    p.add_argument("--same", help="one")


def add_same_there(p: argparse.ArgumentParser) -> None:
    p.add_argument("--same", help="the other")


def add_once(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shared")  # one declaration, called for two parsers: declared once
