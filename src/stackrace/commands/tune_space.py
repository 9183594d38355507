"""What `stackrace tune` measures, read from its command line: the servers named (or,
with `--app`, the common servers of the app's kind), and each one's axes — its
tunables over values bounded by the machine (workers 1 … 2 × cores + 1, threads 1 … 32
on a log scale, at most the ceilings from cores and memory, every choice a param
lists), `--workers` and `--threads` to choose, a variant's own values fixed."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

from stackrace.race.bench.tune_search import Space
from stackrace.settings.parsers import COMMAND_LINE
from stackrace.stacks.catalogue import StackFile
from stackrace.stacks.ceilings import tunable_ceilings
from stackrace.stacks.definition import ConfigError, Stack
from stackrace.stacks.tunables import check_kind, tunables
from stackrace.stacks.userapp import APP_TAG, app_stack_name, default_app_stacks
from stackrace.stacks.variants import resolve


def axes(
    stack: Stack, cores: int, workers: str | None, threads: str | None
) -> dict[str, list[str]]:
    """The values each tunable is swept over, bounded by the machine. Values given
    (`--workers`, `--threads`) are checked, never dropped: one above the machine's
    ceiling, or a list for a setting the stack does not have, is a ValueError."""
    ceil = tunable_ceilings()
    keys = {t.key for t in tunables(stack.spec)}
    for key, given in (("workers", workers), ("threads", threads)):
        if given and key not in keys:
            has = ", ".join(sorted(keys)) or "none"
            raise ValueError(
                f"--{key}: {stack.name} has no {key} setting to tune (its settings: {has})"
            )
        if given and key in stack.overrides:
            raise ValueError(
                f"--{key}: {stack.name} sets {key} already: name {stack.base} to sweep it"
            )
    out: dict[str, list[str]] = {}
    for t in tunables(stack.spec):
        if t.key in stack.overrides:
            # a setting the variant fixes (gunicorn-gthread:threads=2) is not swept: one
            # value, so every candidate's name keeps it
            out[t.key] = [stack.overrides[t.key]]
        elif t.key == "workers":
            values = (
                _ints(workers, "--workers")
                if workers
                else _spread(1, min(2 * cores + 1, ceil.workers))
            )
            out["workers"] = [str(v) for v in values]
        elif t.key == "threads":
            top = min(32, ceil.threads)
            values = (
                _ints(threads, "--threads") if threads else [2**k for k in range(6) if 2**k <= top]
            )
            out["threads"] = [str(v) for v in values]
        elif t.choices:
            out[t.key] = list(t.choices)
    return {k: v for k, v in out.items() if v}


def _ints(text: str, option: str) -> list[int]:
    try:
        values = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise ValueError(f"{option} must be whole numbers like 1,2,4, got {text!r}") from None
    if not values or values[0] < 1:
        raise ValueError(f"{option} must be whole numbers of at least 1, got {text!r}")
    key = option.removeprefix("--")
    for v in values:
        problem = check_kind("count", key, str(v))  # the machine's ceiling, as a variant's
        if problem:
            raise ValueError(f"{option} {v}: {problem.removeprefix(f'{v} ')}")
    return values


def _spread(lo: int, hi: int) -> list[int]:
    """lo … hi: every value up to 3, then about ×1.6 apart, and hi itself."""
    out, v = [], lo
    while v < hi:
        out.append(v)
        v = v + 1 if v < 3 else math.ceil(v * 1.6)
    return [*out, hi]


def stack_to_tune(name: str | None, stacks: StackFile) -> tuple[str | None, str]:
    """The stack a tune sweeps, and a note when it is not the name as given: with
    --app, `gunicorn-gthread` means `gunicorn-gthread[app]` (your app on it), and no
    name means the first of the common servers of the app's kind that runs here."""
    if getattr(stacks, "app", None) is None:
        return name, ""
    if name is None:
        chosen, _ = default_app_stacks(stacks)
        if not chosen:
            return None, "no server here runs your app (stackrace install --into …)"
        return chosen[0], f"no stack named: tuning {chosen[0]} (name one to choose)"
    base, sep, variant = name.partition(":")
    if APP_TAG not in base and app_stack_name(base) in stacks:
        return app_stack_name(base) + sep + variant, ""
    return name, ""


def servers_to_tune(named: Sequence[str], stacks: StackFile) -> list[str] | str:
    """The servers to tune (base names, as the stacks file has them), or why not."""
    names = list(named)
    if not names and getattr(stacks, "app", None) is not None:
        chosen, _ = default_app_stacks(stacks)
        if not chosen:
            return "no server here runs your app (stackrace install --into …)"
        return chosen
    out = []
    for name in names:
        base, note = stack_to_tune(name, stacks)
        if base is None:
            return note
        if base.partition(":")[0] not in stacks:
            return f"no stack {base!r} (`stackrace stacks` lists them)"
        if base in out:
            return f"{base} named twice"
        out.append(base)
    return out


def space_of(
    workers: str | None, threads: str | None, servers: list[str], stacks: StackFile
) -> Space | str:
    """The configurations to try of each server; `workers`, `threads`: --workers and
    --threads as given (None: the server's own range)."""
    cores = len(os.sched_getaffinity(0))
    space: dict[str, dict[str, list[str]]] = {}
    for name in servers:
        try:
            spec = resolve(name, stacks, named_in=COMMAND_LINE)  # tune's own arguments
            grid = axes(spec, cores, workers, threads)
        except (ConfigError, ValueError) as exc:
            return str(exc)
        base = name.partition(":")[0]
        if base in space:
            return f"{base} named twice (name it once; --workers and --threads set its values)"
        space[base] = grid
    return Space(space)
