"""`stackrace stacks`: the stacks in stacks.toml, and whether each can start here.

It first says which stacks files it read and why (config.stacks_files: the shipped one,
then the user's config directory and ./stacks.toml on top; or --stacks-file alone):
with several places a stack can come from, the answer to "why is my stack not listed"
(or "why does it run that command") is those lines. A ./stacks.toml that replaces a
shipped stack is listed all the same, with what it replaces and that nothing uses it
until it is trusted: `stackrace stacks --trust ./stacks.toml` (stackrace.stacks.trust).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from stackrace.commands._common import load
from stackrace.commands.namespace import typed_options
from stackrace.commands.parser import describe, examples
from stackrace.commands.stacks_listing import StackRow, on_terminal, print_rows
from stackrace.commands.target_args import your_app_options
from stackrace.settings.workloads import WORKLOADS
from stackrace.stacks import protocols, trust
from stackrace.stacks.app_spec import YourApp
from stackrace.stacks.availability import Availability, availability
from stackrace.stacks.catalogue import (
    HERE,
    StackFile,
    announcement,
    read_stacks_file,
    replaced_stacks,
    skipped_line,
    typed_path,
    untrusted_line,
)
from stackrace.stacks.ceilings import tunable_ceilings
from stackrace.stacks.definition import ConfigError, StackDef
from stackrace.stacks.variants import resolve

EXAMPLES = examples(
    ("stackrace stacks", "every stack, and whether it can run here (why not, when not)"),
    ("stackrace stacks --json", "the same, as JSON"),
    ("stackrace stacks | grep gunicorn", "a plain table when piped: names never cut"),
    ("stackrace --stacks-file my.toml stacks", "the stacks of one file alone"),
)


def register(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "List the stacks of the stacks files (the shipped stacks.toml and yours), whether "
        "each is available on this machine, and the machine's ceilings for variants.",
        EXAMPLES,
        "docs/stacks.md",
    )
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.add_argument(
        "--trust",
        metavar="FILE",
        help="trust this stacks file (./stacks.toml) to replace shipped stacks, as long "
        "as its content stays as it is now",
    )
    p.set_defaults(func=run, read_options=stacks_options)


@dataclass(frozen=True)
class StacksOptions:
    """`stackrace stacks`'s command line, typed."""

    trust: str | None
    json: bool
    stacks_file: str | None
    your_app: YourApp


def stacks_options(args: argparse.Namespace) -> StacksOptions:
    return typed_options(StacksOptions, args, your_app=your_app_options(args))


def run(o: StacksOptions) -> int:
    if o.trust:
        return _trust(o.trust)
    stacks = load(o.stacks_file, o.your_app, check_trust=False)
    # on stderr with --json or in a pipe, so that stdout stays one JSON document or rows
    out = sys.stderr if o.json or not on_terminal() else None
    for line in announcement(stacks):  # every file read, lowest first
        print(line, file=out)
    for line in _untrusted(stacks):
        print(line, file=out)
    rows: list[dict[str, Any]] = []
    for name, spec in stacks.items():
        served: list[str] = []
        try:
            stack = resolve(name, stacks)
            a = availability(stack)
            served = stack.served(list(WORKLOADS))
        except ConfigError as exc:  # e.g. `cpus` this machine does not have
            a = Availability(False, str(exc), f"fix stack '{name}' in {stacks.source}")
            if name in stacks.untrusted:  # not broken: not trusted yet
                where = typed_path(stacks.path) if stacks.path else "./stacks.toml"
                a = Availability(
                    False, "defined by a file not trusted yet", f"stackrace stacks --trust {where}"
                )
        rows.append(
            {
                "name": name,
                "title": spec.title,
                "family": spec.family,
                "language": spec.language,
                "workers": spec.workers,
                "available": a.available,
                "reason": a.reason,
                "fix": a.fix,
                "description": spec.description,
                # the workloads it serves (the contract's, and optional ones it lists)
                "workloads": served,
                # the protocols it serves: the `http` variant values (stacks.protocols)
                "http": protocols.served(spec),
            }
        )
    if o.json:
        print(msgspec.json.encode(rows).decode())
        return 0
    every = list(WORKLOADS)
    listing = [
        StackRow(
            r["name"], r["title"], r["family"], r["language"],
            # the contract's four are the rule: show what differs from serving all of them
            "all" if r["workloads"] == every else " ".join(r["workloads"]),
            r["available"],
            "" if r["available"] else f"{r['reason']} — {r['fix']}",
            ",".join(r["http"][1:]) or "-",
        )
        for r in rows
    ]  # fmt: skip
    # a table on a terminal; in a pipe, tab-separated rows on stdout, the notes on stderr
    print_rows(listing)
    if any(len(r["http"]) > 1 for r in rows):
        print(
            "h2: HTTP/2 variants, e.g. `hypercorn:http=2` (over TLS) or `:http=h2c` (cleartext)",
            file=out,
        )
    ceilings = tunable_ceilings()
    print(
        f"variants on this machine: workers <= {ceilings.workers}, threads <= "
        f"{ceilings.threads} (`stackrace --no-tunable-limits …` lifts them)",
        file=out,
    )
    missing = sum(not r["available"] for r in rows)
    if missing:
        print(
            f"{missing} of {len(rows)} stacks unavailable: `stackrace install --all` "
            "installs what they need",
            file=out,
        )
    return 0


def _untrusted(stacks: StackFile) -> list[str]:
    """A line for a ./stacks.toml read here that replaces stacks below it and is not
    trusted: every other command refuses it (stacks.stacks.catalogue.load_stacks)."""
    out = []
    below: dict[str, StackDef] = {}
    for path, origin, sha in stacks.files:
        try:
            defs, _replace, _sha = read_stacks_file(path)
        except ConfigError:
            continue  # (read once already: load_stacks said what is wrong)
        replaced = replaced_stacks(defs, below)
        if origin == HERE and replaced and not trust.is_trusted(path, sha):
            out.append(f"  not used: {untrusted_line(path, replaced)}")
        below.update(defs)
    added = [n for n in stacks.untrusted if n in stacks]
    if added and not out:  # a file that only adds: its stacks are listed, never run
        out.append(f"  {skipped_line(stacks, lead='not run:')}")
    return out


def _trust(given: str) -> int:
    """`stackrace stacks --trust FILE`: remember FILE's content as trusted."""
    path = Path(given)
    try:
        _defs, _replace, sha = read_stacks_file(path)  # one that cannot be used: said now
    except ConfigError as exc:
        print(f"stackrace stacks: --trust: {exc}", file=sys.stderr)
        return 2
    try:
        record = trust.trust(path, sha)
    except OSError as exc:
        print(f"stackrace stacks: --trust {given}: cannot record it: {exc}", file=sys.stderr)
        return 1
    print(
        f"trusted {path.resolve()} (sha256 {sha[:12]}…), recorded in {record}: its stacks "
        "are used (added, or replacing shipped ones of the same name) until the file changes"
    )
    return 0
