"""`stackrace stacks`: the stacks in stacks.toml, and whether each can start here.

It first says which stacks files it read and why (config.stacks_files: the shipped one,
then the user's config directory and ./stacks.toml on top; or --stacks-file alone):
with several places a stack can come from, the answer to "why is my stack not listed"
(or "why does it run that command") is those lines.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec

from stackrace.commands._common import load
from stackrace.commands.stacks_listing import StackRow, on_terminal, print_rows
from stackrace.settings.options import examples
from stackrace.settings.workloads import WORKLOADS
from stackrace.stacks.catalogue import ConfigError, resolve, tunable_ceilings
from stackrace.stacks.install import Availability, availability

EXAMPLES = examples(
    ("stackrace stacks", "every stack, and whether it can run here (why not, when not)"),
    ("stackrace stacks --json", "the same, as JSON"),
    ("stackrace stacks | grep gunicorn", "a plain table when piped: names never cut"),
    ("stackrace --stacks-file my.toml stacks", "the stacks of one file alone"),
)


def register(p: argparse.ArgumentParser) -> None:
    p.description = (
        "List the stacks of the stacks files (the shipped stacks.toml and yours), whether "
        "each is available on this machine, and the machine's ceilings for variants."
    )
    p.epilog = EXAMPLES + "\n\nMore: docs/stacks.md"
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    stacks = load(args)
    if stacks is None:
        return 2
    # on stderr with --json or in a pipe, so that stdout stays one JSON document or rows
    out = sys.stderr if args.json or not on_terminal() else None
    for path, origin, _ in stacks.files:  # every file read, lowest first
        print(f"stacks file: {path} ({origin})", file=out)
    if len(stacks.files) > 1:
        print("  (each file adds its stacks and replaces those of the same name)", file=out)
    rows: list[dict[str, Any]] = []
    for name, spec in stacks.items():
        served: list[str] = []
        try:
            stack = resolve(name, stacks)
            a = availability(stack)
            served = stack.served(list(WORKLOADS))
        except ConfigError as exc:  # e.g. `cpus` this machine does not have
            a = Availability(False, str(exc), f"fix stack '{name}' in {stacks.source}")
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
            }
        )
    if args.json:
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
        )
        for r in rows
    ]  # fmt: skip
    # a table on a terminal; in a pipe, tab-separated rows on stdout, the notes on stderr
    print_rows(listing)
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
