"""What several commands share: loading stacks.toml and resolving names, with clean errors."""

from __future__ import annotations

import argparse
import sys

from stackrace.config import ConfigError, Stack, StackDef, load_stacks, resolve


def load(args: argparse.Namespace) -> dict[str, StackDef] | None:
    try:
        return load_stacks(args.stacks_file)
    except ConfigError as exc:
        print(f"stackrace: {exc}", file=sys.stderr)
        return None


def resolve_all(
    names: list[str], stacks: dict[str, StackDef], source: str = "stacks.toml"
) -> list[Stack] | None:
    out = []
    for ref in names:
        for part in _split(ref):
            try:
                out.append(resolve(part, stacks, source))
            except ConfigError as exc:
                print(f"stackrace: {exc}", file=sys.stderr)
                return None
    return out


def _split(ref: str) -> list[str]:
    """'a,b:workers=2,threads=4,c' → ['a', 'b:workers=2,threads=4', 'c'].

    A comma starts a new stack unless what follows is KEY=VALUE of a variant ('a:x=1,b:y=2'
    is two variants: a variant's KEY has no ':').
    """
    parts: list[str] = []
    for piece in ref.split(","):
        key = piece.partition("=")[0]
        if parts and "=" in piece and ":" in parts[-1] and ":" not in key:
            parts[-1] += "," + piece
        elif piece.strip():
            parts.append(piece.strip())
    return parts


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
